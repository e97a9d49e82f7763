package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/backup"
)

// TestBinaryBackupResumesAfterKill9 runs `tessera backup create` against
// the real binary, SIGKILLs the node while it uploads (the CLI fails and
// no manifest is written), restarts it and runs the same backup again:
// it finishes without uploading again what the first run stored, the
// backup verifies, and a fresh node restored from it holds every sample.
func TestBinaryBackupResumesAfterKill9(t *testing.T) {
	b := newBinaryNode(t)
	b.start()
	url := "http://" + b.http
	d := newDataset()
	now := time.Now().UnixMilli()
	for k := range 10 {
		require.NoError(t, d.write(url, 0, 1000, now-int64(10-k)*1000))
	}
	want := d.frozen()

	dir := t.TempDir()
	bucketDir := filepath.Join(dir, "bucket")
	bucketFile := filepath.Join(dir, "bucket.yml")
	require.NoError(t, os.WriteFile(bucketFile, fmt.Appendf(nil, "type: FILESYSTEM\nconfig:\n  directory: %s\n", bucketDir), 0o600))
	create := func(extra ...string) *exec.Cmd {
		return exec.Command(b.bin, append([]string{"backup", "create", "--url", url, "--bucket-config", bucketFile, "--id", "k9"}, extra...)...)
	}
	// A crawling upload, so the kill lands mid-way.
	first := create("--rate-limit", "16KiB", "--concurrency", "1")
	require.NoError(t, first.Start())
	eventually(t, 60*time.Second, "first parts uploaded", func() error {
		n := 0
		_ = filepath.Walk(filepath.Join(bucketDir, "objects"), func(_ string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				n++
			}
			return nil
		})
		if n < 3 {
			return fmt.Errorf("%d parts", n)
		}
		return nil
	})
	b.kill9()
	require.Error(t, first.Wait(), "the backup fails with its node")
	_, err := os.Stat(filepath.Join(bucketDir, "backups", "k9", "manifest.json"))
	require.ErrorIs(t, err, os.ErrNotExist, "no manifest for an incomplete backup")

	b.start()
	out, err := create("-o", "json").Output()
	require.NoError(t, err, "resume: %s", exitStderr(err))
	var m backup.Manifest
	require.NoError(t, json.Unmarshal(out, &m))
	require.Positive(t, m.Totals.Objects)
	require.Less(t, m.Totals.UploadedObjects, m.Totals.Objects, "the resumed run skips what the first one stored")
	t.Logf("resumed: %d of %d parts uploaded by the second run", m.Totals.UploadedObjects, m.Totals.Objects)

	vout, err := exec.Command(b.bin, "backup", "verify", "--bucket-config", bucketFile, "--id", "k9").CombinedOutput()
	require.NoError(t, err, "%s", vout)

	one := restoreCluster(t, 1, 1, 4096, bucketFile, "k9")
	require.NoError(t, want.check(one[0].url(), now-60_000, now+1))
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
