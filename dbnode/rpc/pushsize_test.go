package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/tessera-tsdb/tessera/bench/nodeexporter"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// TestPushdownAnswerSizes holds the per-group answer's streams smaller
// than the doubles they replace, and logs what its bytes are made of
// (cpu_busy of the node_exporter table: avg by (instance) of a rate, one
// or two series a group) over the bench's data (-v shows the figures in
// docs/performance.md).
func TestPushdownAnswerSizes(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	start := time.Now().Add(-40 * time.Minute).Truncate(time.Minute).UnixMilli()
	nodeexporter.Hosts(100, start, func(_ int, series []encodingtest.Series) {
		var batch []storage.Sample
		for _, s := range series {
			for k := range s.T {
				batch = append(batch, storage.Sample{ID: s.ID, Shard: db.Shard(s.ID), T: s.T[k], V: s.V[k]})
			}
		}
		require.NoError(t, db.WriteBatch(testNS, batch))
	})
	req := &query.Request{Namespace: testNS,
		Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "node_cpu_seconds_total"), labels.MustNewMatcher(labels.MatchEqual, "mode", "idle")},
		Steps:    query.Steps{Start: start, End: nodeexporter.End(start), Step: 15_000, Lookback: 300_000},
		Pushdown: query.Pushdown{Func: query.FuncRate, Range: 5 * time.Minute, Agg: query.AggAvg, Grouping: []string{"instance"}}}
	res, err := promapi.Evaluate(t.Context(), dbReader{db}, req, promapi.Options{MaxSamples: 50_000_000})
	require.NoError(t, err)
	pb, err := resultToPB(res, false, streams{sums: true, comps: false})
	require.NoError(t, err)
	var labelsB, countB, sumsB, compB, compNZ, steps int
	for _, g := range pb.Groups {
		for i := range g.LabelNames {
			labelsB += len(g.LabelNames[i]) + len(g.LabelValues[i]) + 4
		}
		countB += proto.Size(&nodepb.PushdownGroup{Count: g.Count})
		sumsB += len(g.Sums)
		compB += 8 * len(g.Comp)
		for _, c := range g.Comp {
			if c != 0 {
				compNZ++
			}
		}
		steps += len(g.Count)
	}
	var countS, compS int
	var enc encoding.Encoder
	for _, g := range res.Groups {
		enc.Reset()
		for k, n := range g.Count {
			if n != 0 {
				require.NoError(t, enc.Append(int64(k), n))
			}
		}
		countS += len(enc.Bytes())
		enc.Reset()
		for k, c := range g.Comp {
			if g.Count[k] != 0 {
				require.NoError(t, enc.Append(int64(k), c))
			}
		}
		compS += len(enc.Bytes())
	}
	pbc, err := resultToPB(res, false, streams{sums: true, comps: true})
	require.NoError(t, err)
	pba, err := resultToPB(res, false, streams{sums: true, comps: true, counts: true})
	require.NoError(t, err)
	require.Less(t, proto.Size(pbc), proto.Size(pb), "compensations as streams must be smaller than as doubles")
	require.Less(t, proto.Size(pba), proto.Size(pbc), "counts as streams must be smaller than as varints")
	t.Logf("with comp_streams and count_streams %d bytes (%.3fx)", proto.Size(pba), float64(proto.Size(pba))/float64(proto.Size(pb)))
	t.Logf("as streams: counts %d, comps %d; answer with comp_streams %d bytes, without %d (%.3fx)",
		countS, compS, proto.Size(pbc), proto.Size(pb), float64(proto.Size(pbc))/float64(proto.Size(pb)))
	t.Logf("series %d groups %d steps/group %d: total %d bytes; labels %d, counts %d, sums %d, comps %d (%d non-zero of %d)",
		res.Series, len(pb.Groups), steps/max(1, len(pb.Groups)), proto.Size(pb), labelsB, countB, sumsB, compB, compNZ, steps)
}

// dbReader is a query.Reader over a whole database.
type dbReader struct{ db *storage.Database }

func (r dbReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	return r.db.Query(ctx, ns, ms, start, end, storage.QueryOptions{})
}

func (r dbReader) LabelNames(_ context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.db.LabelNames(ns, ms, start, end)
}

func (r dbReader) LabelValues(_ context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.db.LabelValues(ns, name, ms, start, end)
}
