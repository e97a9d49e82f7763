package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/placement"
)

// errPeerDown is what a dead fake peer answers.
var errPeerDown = errors.New("fake peer: connection reset")

// fakePeer serves a node's flushed blocks and unflushed series from maps,
// pageSeries series per page. After dieAfterPages pages (block and
// unflushed together; <= 0 never) it dies: every call fails until
// revive. It counts the pages it served per block.
type fakePeer struct {
	pageSeries int

	mu            sync.Mutex
	blocks        map[blockKey][]rpc.BlockSeries
	unflushed     map[uint32][]rpc.FetchedSeries
	dieAfterPages int
	pages         int
	dead          bool
	blockPages    map[blockKey]int
	unflushedReqs int
	metadataReqs  int
}

func newFakePeer() *fakePeer {
	return &fakePeer{pageSeries: 1, blocks: map[blockKey][]rpc.BlockSeries{},
		unflushed: map[uint32][]rpc.FetchedSeries{}, blockPages: map[blockKey]int{}}
}

// addBlock stores a flushed block: series by ID -> samples.
func (p *fakePeer) addBlock(t *testing.T, shard uint32, start int64, series map[string][]sample) {
	t.Helper()
	var out []rpc.BlockSeries
	for id, ss := range series {
		sealed, err := encoding.Seal(stream(t, ss))
		if err != nil {
			t.Fatalf("seal %s: %v", id, err)
		}
		out = append(out, rpc.BlockSeries{ID: []byte(id), Data: sealed, Samples: uint32(len(ss))})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	p.blocks[blockKey{shard, start}] = out
}

// addUnflushed stores a shard's in-memory series.
func (p *fakePeer) addUnflushed(t *testing.T, shard uint32, series map[string][]sample) {
	t.Helper()
	var out []rpc.FetchedSeries
	for id, ss := range series {
		out = append(out, rpc.FetchedSeries{ID: []byte(id), Shard: shard, Stream: stream(t, ss)})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	p.unflushed[shard] = out
}

func (p *fakePeer) revive() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead, p.pages, p.dieAfterPages = false, 0, 0
}

func (p *fakePeer) pagesOf(shard uint32, start int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blockPages[blockKey{shard, start}]
}

// page takes one page slot, or reports the peer dead.
func (p *fakePeer) page() error {
	if p.dead {
		return errPeerDown
	}
	if p.dieAfterPages > 0 && p.pages >= p.dieAfterPages {
		p.dead = true
		return errPeerDown
	}
	p.pages++
	return nil
}

func (p *fakePeer) BlockMetadata(ctx context.Context, req *rpc.BlockMetadataRequest) (*rpc.BlockMetadataResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return nil, errPeerDown
	}
	p.metadataReqs++
	resp := &rpc.BlockMetadataResponse{}
	for _, sh := range req.Shards {
		sb := rpc.ShardBlocks{Shard: sh}
		for k, series := range p.blocks {
			if k.shard != sh {
				continue
			}
			h := xxhash.New()
			n := 0
			for _, s := range series {
				_, _ = h.Write(s.ID)
				_, _ = h.Write(s.Data)
				n += int(s.Samples)
			}
			sb.Blocks = append(sb.Blocks, rpc.BlockMeta{BlockStart: k.start, Series: uint32(len(series)), Samples: uint32(n), Digest: h.Sum64()})
		}
		sort.Slice(sb.Blocks, func(i, j int) bool { return sb.Blocks[i].BlockStart < sb.Blocks[j].BlockStart })
		resp.Shards = append(resp.Shards, sb)
	}
	return resp, nil
}

func (p *fakePeer) FetchBlock(ctx context.Context, req *rpc.FetchBlockRequest) (*rpc.FetchBlockResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.page(); err != nil {
		return nil, err
	}
	k := blockKey{req.Shard, req.BlockStart}
	series, ok := p.blocks[k]
	if !ok {
		return nil, fmt.Errorf("shard %d has no flushed block at %d", req.Shard, req.BlockStart)
	}
	p.blockPages[k]++
	var out rpc.FetchBlockResponse
	for _, s := range series {
		if req.After != nil && bytes.Compare(s.ID, req.After) <= 0 {
			continue
		}
		if len(out.Series) == p.pageSeries {
			out.More = true
			break
		}
		out.Series = append(out.Series, s)
	}
	return &out, nil
}

func (p *fakePeer) FetchUnflushed(ctx context.Context, req *rpc.FetchUnflushedRequest) (*rpc.FetchUnflushedResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.page(); err != nil {
		return nil, err
	}
	p.unflushedReqs++
	var out rpc.FetchUnflushedResponse
	for _, s := range p.unflushed[req.Shard] {
		if req.After != nil && bytes.Compare(s.ID, req.After) <= 0 {
			continue
		}
		if len(out.Series) == p.pageSeries {
			out.More = true
			break
		}
		out.Series = append(out.Series, s)
	}
	return &out, nil
}

// fakeStore holds a placement and applies the real placement.MarkAvailable
// to it. failures are returned by the next MarkAvailable calls in order
// (nil entries succeed); beforeMark runs before each call, under the lock,
// to change the placement under the bootstrapper.
type fakeStore struct {
	mu         sync.Mutex
	p          placement.Placement
	failures   []error
	applyAnd   bool // a failure still applies the CAS (reply lost)
	beforeMark func(call int, p *placement.Placement)
	calls      [][]uint32
}

func (s *fakeStore) MarkAvailable(ctx context.Context, id string, shards []uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, append([]uint32(nil), shards...))
	if s.beforeMark != nil {
		s.beforeMark(len(s.calls), &s.p)
	}
	var injected error
	if len(s.failures) > 0 {
		injected, s.failures = s.failures[0], s.failures[1:]
	}
	if injected != nil && !s.applyAnd {
		return injected
	}
	next, err := placement.MarkAvailable(s.p, id, shards...)
	if err != nil {
		return err
	}
	next.Version = s.p.Version + 1
	s.p = next
	return injected
}

func (s *fakeStore) Placement(ctx context.Context) (placement.Placement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p.Clone(), nil
}

func (s *fakeStore) markCalls() [][]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]uint32(nil), s.calls...)
}

func (s *fakeStore) state(id string, shard uint32) (placement.ShardState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.p.Instance(id)
	if !ok {
		return 0, false
	}
	c, ok := in.Shard(shard)
	return c.State, ok
}

type sample struct {
	t int64
	v float64
}

func stream(t *testing.T, ss []sample) []byte {
	t.Helper()
	e := encoding.NewEncoder()
	for _, s := range ss {
		if err := e.Append(s.t, s.v); err != nil {
			t.Fatalf("encode: %v", err)
		}
	}
	return append([]byte(nil), e.Bytes()...)
}
