package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/backup"
	"github.com/tessera-tsdb/tessera/dbnode/console"
	"github.com/tessera-tsdb/tessera/dbnode/node"
	"github.com/tessera-tsdb/tessera/placement"
)

// getJSON decodes url's JSON answer into out.
func getJSON(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

var pageBackup = regexp.MustCompile(`data-backup-done="(\d+)" data-backup-parts="(\d+)"`)

// TestBackupProgressIsLive uploads a snapshot of a one-node cluster at a
// crawl (2 KiB/s, one part at a time) and reads, while it runs, the
// node's backup status, the console's JSON, the tessera_backup_upload_*
// gauges and the console page in headless Chromium: each shows parts
// done between none and all, not only the result at the end. Cancelling the upload (the caller
// goes away) ends it, said in the status and the running gauge.
func TestBackupProgressIsLive(t *testing.T) {
	e := startEtcd(t)
	tn := startNode(t, nodeConfig(t, "node1", "rack1", e.client))
	p, err := placement.Init([]placement.Instance{tn.instance()}, 4096, 1)
	require.NoError(t, err)
	putPlacement(t, etcdClient(t, e.client), p)
	eventually(t, time.Minute, "node1 ready", tn.ready)
	d := newDataset()
	now := time.Now().UnixMilli()
	for k := range 3 {
		require.NoError(t, d.write(tn.url(), 0, 1000, now-int64(3-k)*1000))
	}

	resp, err := http.Post(tn.url()+node.SnapshotPath, "application/json", bytes.NewReader([]byte(`{"id":"live"}`)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	shards := make([]uint32, 4096)
	for i := range shards {
		shards[i] = uint32(i)
	}
	req, _ := json.Marshal(backup.UploadRequest{
		BucketConfig: fmt.Sprintf("type: FILESYSTEM\nconfig:\n  directory: %s\n", filepath.Join(t.TempDir(), "bucket")),
		Snapshot:     "live", Shards: shards, BytesPerSecond: 2 << 10, Concurrency: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, tn.url()+node.UploadPath, bytes.NewReader(req))
	require.NoError(t, err)
	hr.Header.Set("Content-Type", "application/json")
	uploadDone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			uploadDone <- err
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var l backup.UploadLine
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Done {
				uploadDone <- fmt.Errorf("the crawling upload finished before it was cancelled")
				return
			}
		}
		uploadDone <- sc.Err()
	}()

	midway := func(p backup.Progress) error {
		if p.Parts == 0 || p.Done == 0 || p.Done >= p.Parts {
			return fmt.Errorf("%d of %d parts done", p.Done, p.Parts)
		}
		return nil
	}
	eventually(t, time.Minute, "the status, the console and the gauges midway through the upload", func() error {
		var st node.BackupStatus
		if err := getJSON(tn.url()+node.BackupStatusPath, &st); err != nil {
			return err
		}
		if !st.Running {
			return fmt.Errorf("status not running: %+v", st)
		}
		if err := midway(st.Progress); err != nil {
			return fmt.Errorf("status: %w", err)
		}
		var cl struct {
			Backup node.BackupStatus `json:"backup"`
		}
		if err := getJSON(tn.url()+console.Path, &cl); err != nil {
			return err
		}
		if err := midway(cl.Backup.Progress); err != nil || !cl.Backup.Running {
			return fmt.Errorf("console (running %v): %v", cl.Backup.Running, err)
		}
		var g backup.Progress
		var running float64
		for name, dst := range map[string]any{"running": &running, "parts": &g.Parts, "parts_done": &g.Done} {
			v, err := metricValue(tn.url(), "tessera_backup_upload_"+name)
			if err != nil {
				return err
			}
			switch dst := dst.(type) {
			case *float64:
				*dst = v
			case *int:
				*dst = int(v)
			}
		}
		if running != 1 {
			return fmt.Errorf("tessera_backup_upload_running %v", running)
		}
		if err := midway(g); err != nil {
			return fmt.Errorf("gauges: %w", err)
		}
		t.Logf("midway: status %d/%d parts, console %d/%d, gauges %d/%d", st.Progress.Done, st.Progress.Parts,
			cl.Backup.Progress.Done, cl.Backup.Progress.Parts, g.Done, g.Parts)
		return nil
	})

	bin := chromiumPath(t)
	eventually(t, time.Minute, "the console page draws the upload midway", func() error {
		dom, err := runChromium(t, bin, tn.url()+"/", "--dump-dom")
		if err != nil {
			return err
		}
		m := pageBackup.FindSubmatch(dom)
		if m == nil {
			return fmt.Errorf("no backup row in the page")
		}
		done, _ := strconv.Atoi(string(m[1]))
		parts, _ := strconv.Atoi(string(m[2]))
		return midway(backup.Progress{Done: done, Parts: parts})
	})

	cancel()
	<-uploadDone
	eventually(t, time.Minute, "the cancelled upload said so", func() error {
		var st node.BackupStatus
		if err := getJSON(tn.url()+node.BackupStatusPath, &st); err != nil {
			return err
		}
		running, err := metricValue(tn.url(), "tessera_backup_upload_running")
		if err != nil {
			return err
		}
		if st.Running || st.Error == "" || running != 0 {
			return fmt.Errorf("status %+v, running gauge %v", st, running)
		}
		return nil
	})
}
