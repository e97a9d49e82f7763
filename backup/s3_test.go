package backup

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/thanos-io/objstore"
)

// versitygwBinary finds versitygw (an S3 gateway over a local directory):
// $TESSERA_VERSITYGW, then PATH, then $(go env GOPATH)/bin. Under CI
// (CI=true) a missing binary fails the test; elsewhere it skips, naming
// scripts/versitygw.sh, which installs it.
func versitygwBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TESSERA_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(string(trimNL(out))) {
			p := filepath.Join(dir, "bin", "versitygw")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	msg := "versitygw not found ($TESSERA_VERSITYGW, PATH, $(go env GOPATH)/bin): run scripts/versitygw.sh install"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// startVersitygw serves a fresh directory over S3 on a free loopback port
// with one bucket, and returns objstore's S3 config for it and the
// directory holding the bucket's objects.
func startVersitygw(t *testing.T) ([]byte, string) {
	t.Helper()
	bin := versitygwBinary(t)
	root := t.TempDir()
	const bucket = "tessera"
	require.NoError(t, os.Mkdir(filepath.Join(root, bucket), 0o755))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cmd := exec.Command(bin, "-p", addr, "-a", "tessera-key", "-s", "tessera-secret", "posix", root)
	// It logs a line per request: kept in a file, shown when the test fails.
	logPath := filepath.Join(t.TempDir(), "versitygw.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("versitygw log (last 4 KiB):\n%s", b[max(0, len(b)-4096):])
			}
		}
	})
	waitfor.Condition(t, 30*time.Second, 50*time.Millisecond, "versitygw to listen on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	conf := fmt.Appendf(nil, `type: S3
config:
  bucket: %s
  endpoint: %s
  access_key: tessera-key
  secret_key: tessera-secret
  insecure: true
`, bucket, addr)
	return conf, filepath.Join(root, bucket)
}

// TestBackupS3 runs the backup scenario against a real S3 server.
func TestBackupS3(t *testing.T) {
	conf, dir := startVersitygw(t)
	b, err := NewBucket(conf)
	require.NoError(t, err)
	defer b.Close()
	// The server answers before it is ready for requests on a slow box.
	require.Eventually(t, func() bool {
		_, err := b.Exists(context.Background(), "probe")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
	var _ objstore.Bucket = b
	backupScenario(t, b, func(key string) string { return filepath.Join(dir, key) })
}
