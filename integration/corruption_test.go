package integration

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/placement"
)

// TestCommitLogBitFlipCostsOneRecord is the scenario on a real
// node: a few MB of commit log written through remote write, one bit
// flipped in the middle of the file while the node is down, and a
// restart. Before resync the node dropped everything after the flip;
// now it loses at most the one request whose record the flip hit, and
// says so on /ready.
func TestCommitLogBitFlipCostsOneRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a few MB through remote write")
	}
	e := startEtcd(t)
	n := startNode(t, nodeConfig(t, "node1", "rack1", e.client))
	c := etcdClient(t, e.client)
	p, err := placement.Init([]placement.Instance{n.instance()}, 4096, 1)
	require.NoError(t, err)
	putPlacement(t, c, p)
	eventually(t, 60*time.Second, "node1 ready", n.ready)

	const series, requests = 1000, 150 // one sample per series per request
	d := newDataset()
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	for r := 0; r < requests; r++ {
		require.NoError(t, d.write(n.url(), 0, series, t0+int64(r)*100))
	}
	n.stop()

	files, err := filepath.Glob(filepath.Join(n.cfg.DataDir, "commitlog", "commitlog-*.db"))
	require.NoError(t, err)
	var path string
	var size int64
	for _, f := range files { // the file the writes went to: the largest
		if st, err := os.Stat(f); err == nil && st.Size() > size {
			path, size = f, st.Size()
		}
	}
	require.Greater(t, size, int64(1<<20), "a few MB of commit log")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x08
	require.NoError(t, os.WriteFile(path, data, 0o644))

	n = n.restart(t)
	eventually(t, 60*time.Second, "node1 ready after restart", n.ready)
	resp, err := http.Get(n.url() + "/ready")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "damage", "the corruption is reported on /ready")
	require.Contains(t, string(body), filepath.Base(path)+".corrupt")
	require.FileExists(t, path+".corrupt")

	got, err := remoteRead(n.url(), t0-1, t0+requests*100)
	require.NoError(t, err)
	kept := 0
	wrong := 0
	for k, want := range d.series {
		have := map[int64]float64{}
		for _, s := range got[k] {
			have[s.Timestamp] = s.Value
		}
		for _, s := range want {
			v, ok := have[s.Timestamp]
			if !ok {
				continue
			}
			kept++
			if math.Float64bits(v) != math.Float64bits(s.Value) {
				wrong++
			}
		}
	}
	total := series * requests
	t.Logf("commit log %d bytes, bit flipped at %d: %d of %d acknowledged samples kept (%d lost); /ready: %s",
		size, len(data)/2, kept, total, total-kept, strings.TrimSpace(string(body)))
	require.Zero(t, wrong, "no sample comes back wrong")
	require.GreaterOrEqual(t, kept, total-series, fmt.Sprintf("at most one request (%d samples) lost", series))
}
