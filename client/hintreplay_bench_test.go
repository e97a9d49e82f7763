package client

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client/hints"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/tessera-tsdb/tessera/placement"
)

// BenchmarkHintReplay: how fast a backlog of hints drains into a real
// node (RPC server over a real storage engine, loopback), unpaced. The
// backlog is what a replica stopped under load leaves: one record per
// remote-write batch, each holding one sample of each of 1000 series,
// ~20 MB in all. Reports the drain rate in hint bytes on disk (MB/s).
func BenchmarkHintReplay(b *testing.B) {
	const series, backlog = 1000, 20 << 20
	ids := make([][]byte, series)
	for i := range ids {
		ids[i] = ident.FromLabels(labels.FromStrings("__name__", "http_requests_total", "job", "api",
			"instance", "host-"+strconv.Itoa(i)+":9100"))
	}
	var bytes, secs float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := hints.Open(b.TempDir(), hints.Options{MaxBytes: 1 << 30, MaxAge: time.Hour})
		require.NoError(b, err)
		q, err := st.Queue("node3")
		require.NoError(b, err)
		start := time.Now().Add(-5 * time.Minute).UnixMilli()
		for k := 0; st.Status()[0].Bytes < backlog; k++ {
			batch := make([]storage.Sample, series)
			for j := range batch {
				batch[j] = storage.Sample{ID: ids[j], Shard: ident.Shard(ids[j], 64), T: start + int64(k), V: float64(k)}
			}
			require.NoError(b, q.Append("default", batch))
		}
		size := float64(st.Status()[0].Bytes)
		s := replaySession(b, st)
		b.StartTimer()
		t0 := time.Now()
		waitfor.Condition(b, 10*time.Minute, 5*time.Millisecond, "the hint queue to drain", func() error {
			if n := records(st, "node3"); n > 0 {
				return fmt.Errorf("%d records left", n)
			}
			return nil
		})
		secs += time.Since(t0).Seconds()
		bytes += size
		b.StopTimer()
		require.NoError(b, s.Close())
		require.NoError(b, st.Close())
	}
	b.ReportMetric(bytes/secs/1e6, "MB/s")
}

// replaySession starts a session that replays st's hints to node3, a
// real node on loopback; node1 and node2 are in-memory fakes. The
// placement has the 64 shards of serveNode's engine.
func replaySession(b *testing.B, st *hints.Store) *Session {
	c3, _ := serveNode(b, false)
	var ins []placement.Instance
	fakes := map[string]Peer{}
	for i := 1; i <= 3; i++ {
		ep := fmt.Sprintf("127.0.0.1:900%d", i)
		ins = append(ins, placement.Instance{ID: "node" + strconv.Itoa(i), IsolationGroup: "rack" + strconv.Itoa(i), Zone: "z", Weight: 1, Endpoint: ep})
		fakes[ep] = &fakePeer{name: "node" + strconv.Itoa(i)}
	}
	p, err := placement.Init(ins, 64, 3)
	require.NoError(b, err)
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(NewMap(placement.MarkAllAvailable(p))), ReadLevel: ReadMajority, WriteLevel: WriteMajority,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 10 * time.Second, MaxBatch: 16384, Hints: HintOptions{Store: st},
		Dial: func(ep string) (Peer, error) {
			if ep == "127.0.0.1:9003" {
				return unclosed{c3}, nil
			}
			return fakes[ep], nil
		},
	})
	require.NoError(b, err)
	return s
}

// unclosed leaves closing the client to serveNode's cleanup.
type unclosed struct{ *rpc.Client }

func (unclosed) Close() error { return nil }
