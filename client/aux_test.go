package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

// auxPeer is a fakePeer that also keeps exemplars and metadata, in the
// real stores, frozen or failing with it.
type auxPeer struct {
	*fakePeer
	ex   *exemplars.Store
	meta *metadata.Store
}

func newAuxPeer(name string) *auxPeer {
	return &auxPeer{fakePeer: &fakePeer{name: name}, ex: exemplars.New(1000), meta: metadata.New(1000)}
}

func (p *auxPeer) ExemplarsWrite(ctx context.Context, items []exemplars.Item) (int, error) {
	if err := p.enter(ctx); err != nil {
		return 0, err
	}
	return p.ex.Add(items), nil
}

func (p *auxPeer) ExemplarsQuery(ctx context.Context, start, end int64, sets [][]*labels.Matcher) ([]exemplar.QueryResult, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	return p.ex.Select(start, end, sets...), nil
}

func (p *auxPeer) MetadataWrite(ctx context.Context, rs []metadata.Record) error {
	if err := p.enter(ctx); err != nil {
		return err
	}
	p.meta.AddRecords(rs)
	return nil
}

func (p *auxPeer) MetadataQuery(ctx context.Context, metric string, limit, limitPerMetric int) (map[string][]metadata.Entry, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	return p.meta.Query(metric, limit, limitPerMetric), nil
}

// auxCluster is newFakeCluster's three nodes as auxPeers, but for the
// endpoints in plain, which stay plain fakePeers (older nodes).
func auxCluster(t testing.TB, plain ...string) (*fakeCluster, map[string]*auxPeer, func(string) (Peer, error)) {
	c := newFakeCluster(t)
	aux := map[string]*auxPeer{}
	for ep, p := range c.peers {
		aux[ep] = &auxPeer{fakePeer: p, ex: exemplars.New(1000), meta: metadata.New(1000)}
	}
	for _, ep := range plain {
		delete(aux, ep)
	}
	dial := func(ep string) (Peer, error) {
		if p := aux[ep]; p != nil {
			return p, nil
		}
		return c.dial(ep)
	}
	return c, aux, dial
}

func auxSession(t *testing.T, c *fakeCluster, dial DialFunc, level ReadLevel, timeout time.Duration) *Session {
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: level, WriteLevel: WriteMajority,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: timeout, MaxBatch: 1000, Dial: dial,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func testExemplars(n int) []exemplars.Item {
	var out []exemplars.Item
	for i := range n {
		ls := labels.FromStrings("__name__", "m", "i", fmt.Sprint(i))
		out = append(out, exemplars.Item{SeriesID: ident.FromLabels(ls), Labels: labels.FromStrings("trace_id", fmt.Sprint("t", i)), V: float64(i), T: int64(1000 + i)})
	}
	return out
}

var allM = []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")}

// TestAuxWriteReachesOwnersAndQueryMerges: exemplars and metadata reach
// every owner; a query through the cluster returns each once; a frozen
// owner does not hold a query (the hedge asks another).
func TestAuxWriteReachesOwnersAndQueryMerges(t *testing.T) {
	c, aux, dial := auxCluster(t)
	s := auxSession(t, c, dial, ReadUnstrictMajority, 30*time.Second)
	items := testExemplars(20)
	ids := make([][]byte, len(items))
	for i := range items {
		ids[i] = items[i].SeriesID
	}
	s.WriteExemplars(items)
	for i := range items {
		items[i].SeriesID[0] ^= 0xff // the caller's buffers are reused: the session copied them
	}
	s.WriteMetadata([]metadata.Record{{Metric: "m", Entry: metadata.Entry{Type: model.MetricTypeCounter, Help: "M."}}})
	for ep, p := range aux {
		waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, "exemplars and metadata on "+ep, func() error {
			if n := p.ex.Len(); n != 20 {
				return fmt.Errorf("%d exemplars", n)
			}
			if p.meta.Len() != 1 {
				return fmt.Errorf("no metadata")
			}
			return nil
		})
	}
	res, warns, err := s.QueryExemplars(context.Background(), 0, 5000, [][]*labels.Matcher{allM})
	require.NoError(t, err)
	require.Empty(t, warns)
	require.Len(t, res, 20)
	for _, r := range res {
		require.Len(t, r.Exemplars, 1, "each exemplar once, though every replica holds it")
	}
	m, warns, err := s.QueryMetadata(context.Background(), "", -1, -1)
	require.NoError(t, err)
	require.Empty(t, warns)
	require.Equal(t, map[string][]metadata.Entry{"m": {{Type: model.MetricTypeCounter, Help: "M."}}}, m)

	// A frozen owner: the hedge asks the third one, which answers for it.
	aux["127.0.0.1:9001"].setFrozen(true)
	defer aux["127.0.0.1:9001"].setFrozen(false)
	res, _, err = s.QueryExemplars(context.Background(), 0, 5000, [][]*labels.Matcher{allM})
	require.NoError(t, err)
	require.Len(t, res, 20)
}

// TestAuxFrozenAndOlderNodes: an owner without the methods is skipped
// (counted, and another owner asked); with another owner frozen too, the
// answer comes from the third within the request timeout, with warnings
// naming both.
func TestAuxFrozenAndOlderNodes(t *testing.T) {
	c, aux, dial := auxCluster(t, "127.0.0.1:9003")
	s := auxSession(t, c, dial, ReadUnstrictMajority, 30*time.Second)
	s.WriteExemplars(testExemplars(5))
	for _, p := range aux {
		waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, "exemplars delivered", func() error {
			if p.ex.Len() != 5 {
				return fmt.Errorf("%d exemplars", p.ex.Len())
			}
			return nil
		})
	}
	res, _, err := s.QueryExemplars(context.Background(), 0, 5000, [][]*labels.Matcher{allM})
	require.NoError(t, err)
	require.Len(t, res, 5, "node3 is too old: another owner answers")
	aux["127.0.0.1:9001"].setFrozen(true)

	// The session's level does not matter: all would be impossible at once.
	all := auxSession(t, c, dial, ReadAll, 2*time.Second)
	res, warns, err := all.QueryExemplars(context.Background(), 0, 5000, [][]*labels.Matcher{allM})
	require.NoError(t, err)
	require.Len(t, res, 5)
	require.Len(t, warns, 2, "%v", warns)
	require.Contains(t, warns[0]+warns[1], "node1 (127.0.0.1:9001): no answer")
	require.Contains(t, warns[0]+warns[1], "node3 (127.0.0.1:9003): node does not serve exemplars and metadata")
	aux["127.0.0.1:9001"].setFrozen(false)
}
