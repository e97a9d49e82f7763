package rpc

import (
	"context"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rollup"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ctxCheckEvery is how many series a fetch encodes between looks at its
// context.
const ctxCheckEvery = 64

// fetch answers one series per requested ID, in order. Every ID's shard
// must be readable here, or nothing is read.
func (s *Server) fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	if _, err := s.namespace(req.Namespace); err != nil {
		return nil, err
	}
	if req.Start > req.End {
		return nil, status.Errorf(codes.InvalidArgument, "start %d after end %d", req.Start, req.End)
	}
	if err := s.opts.Limits.CheckFetchIDs(len(req.IDs)); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	check := newShardCheck(s.own, OpRead, s.db.NumShards())
	shards := make([]uint32, len(req.IDs))
	for i, id := range req.IDs {
		shards[i] = s.db.Shard(id)
		check.allowed(shards[i])
	}
	if err := check.err(ctx); err != nil {
		return nil, err
	}
	resp := &FetchResponse{Series: make([]FetchedSeries, len(req.IDs))}
	limit := sizeLimit{max: s.opts.MaxMsgSize}
	for i, id := range req.IDs {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, ctxStatus(err)
			}
		}
		it, err := s.db.Read(req.Namespace, id, req.Start, req.End)
		if err != nil {
			return nil, s.fail("Fetch", "read series", err)
		}
		hit, err := s.db.ReadHistograms(req.Namespace, id, req.Start, req.End)
		if err != nil {
			return nil, s.fail("Fetch", "read series histograms", err)
		}
		stream, n, err := encoding.Encode(it)
		if err != nil {
			return nil, s.fail("Fetch", "read series", err)
		}
		if n == 0 {
			stream = nil // no samples: an empty stream, not a header
		}
		hist, err := s.fetchHistograms("Fetch", id, hit, req.AcceptHistograms)
		if err != nil {
			return nil, err
		}
		resp.Series[i] = FetchedSeries{ID: id, Shard: shards[i], Stream: stream, Histograms: hist}
		if err := limit.add(&resp.Series[i]); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// fetchTagged answers the series matching the matchers in the shards
// asked for (all of them readable here) or, with none asked for, in every
// shard this node may read.
func (s *Server) fetchTagged(ctx context.Context, req *FetchTaggedRequest) (*FetchResponse, error) {
	ns, err := s.namespace(req.Namespace)
	if err != nil {
		return nil, err
	}
	if !ns.Index {
		return nil, status.Errorf(codes.InvalidArgument, "namespace %q is not indexed: queries by label need index: true", req.Namespace)
	}
	if req.Start > req.End {
		return nil, status.Errorf(codes.InvalidArgument, "start %d after end %d", req.Start, req.End)
	}
	matchers, err := toMatchers(req.Matchers)
	if err != nil {
		return nil, err
	}

	var filter func(uint32) bool
	if len(req.Shards) > 0 {
		check := newShardCheck(s.own, OpRead, s.db.NumShards())
		want := make(map[uint32]struct{}, len(req.Shards))
		for _, sh := range req.Shards {
			check.allowed(sh)
			want[sh] = struct{}{}
		}
		if err := check.err(ctx); err != nil {
			return nil, err
		}
		filter = func(sh uint32) bool { _, ok := want[sh]; return ok }
	} else {
		// Not refusals: the caller asked for whatever this node serves.
		var mu sync.Mutex
		check := newShardCheck(s.own, OpRead, s.db.NumShards())
		filter = func(sh uint32) bool {
			mu.Lock()
			defer mu.Unlock()
			return check.allowed(sh)
		}
	}

	if req.RollupWindows {
		return s.fetchRollup(ctx, req, matchers, filter)
	}
	found, err := s.db.Query(ctx, req.Namespace, matchers, req.Start, req.End, storage.QueryOptions{Shards: filter})
	if err != nil {
		return nil, s.fail("FetchTagged", "query", err)
	}
	resp := &FetchResponse{Series: make([]FetchedSeries, 0, len(found))}
	limit := sizeLimit{max: s.opts.MaxMsgSize}
	for i, f := range found {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, ctxStatus(err)
			}
		}
		stream, n, err := encoding.Encode(f.Values)
		if err != nil {
			return nil, s.fail("FetchTagged", "read series", err)
		}
		hist, err := s.fetchHistograms("FetchTagged", f.ID, f.Histograms, req.AcceptHistograms)
		if err != nil {
			return nil, err
		}
		if n == 0 && len(hist) == 0 {
			continue // indexed in the range, but no sample in it
		}
		if n == 0 {
			stream = nil
		}
		resp.Series = append(resp.Series, FetchedSeries{ID: f.ID, Shard: f.Shard, Stream: stream, Histograms: hist})
		if err := limit.add(&resp.Series[len(resp.Series)-1]); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// fetchHistograms encodes a fetched series' native histograms (hit nil:
// none) as histogram streams. For a requester that did not say it reads
// them (an older node, which would drop the field unseen) a series holding
// any is refused with FailedPrecondition instead: never its floats alone
// passed off as the whole series.
func (s *Server) fetchHistograms(method string, id []byte, hit encoding.HistogramIterator, accept bool) ([][]byte, error) {
	if hit == nil {
		return nil, nil
	}
	hist, n, err := encoding.EncodeHistograms(hit)
	if err != nil {
		return nil, s.fail(method, "read series histograms", err)
	}
	if n == 0 {
		return nil, nil
	}
	if !accept {
		return nil, errHistogramsNotAccepted(id)
	}
	return hist, nil
}

func errHistogramsNotAccepted(id []byte) error {
	return status.Errorf(codes.FailedPrecondition,
		"series %q holds native histograms, which the requesting node does not read (it predates them and would drop them): upgrade it", id)
}

func (s *Server) fail(method, what string, err error) error {
	st := storageStatus(what, err)
	s.logTransient(method, st)
	return st
}

// toMatchers compiles wire matchers; a bad type or regex is the caller's
// mistake (InvalidArgument).
func toMatchers(ms []Matcher) ([]*labels.Matcher, error) {
	if len(ms) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no matchers: a query needs at least one")
	}
	out := make([]*labels.Matcher, len(ms))
	for i, m := range ms {
		if m.Type > uint8(labels.MatchNotRegexp) {
			return nil, status.Errorf(codes.InvalidArgument, "matcher %d: unknown type %d", i, m.Type)
		}
		lm, err := newMatcher(m)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "matcher %s%s%q: %v", m.Name, labels.MatchType(m.Type), m.Value, err)
		}
		out[i] = lm
	}
	return out, nil
}

// RollupDatabase is what a Database that holds rollup namespaces also
// has (storage.Database does): FetchTagged with RollupWindows reads it.
type RollupDatabase interface {
	QueryRollup(ctx context.Context, ns string, matchers []*labels.Matcher, start, end int64, qo storage.QueryOptions) ([]storage.RollupSeries, error)
}

// fetchRollup answers FetchTagged with RollupWindows: each matching
// series' windows ending in [Start, End] in the shards filter allows, as
// one rollup payload.
func (s *Server) fetchRollup(ctx context.Context, req *FetchTaggedRequest, matchers []*labels.Matcher, filter func(uint32) bool) (*FetchResponse, error) {
	rdb, ok := s.db.(RollupDatabase)
	ns := s.namespaces[req.Namespace]
	if !ok || ns.RollupOf == "" {
		return nil, status.Errorf(codes.InvalidArgument, "namespace %q is not a rollup namespace", req.Namespace)
	}
	found, err := rdb.QueryRollup(ctx, req.Namespace, matchers, req.Start, req.End, storage.QueryOptions{Shards: filter})
	if err != nil {
		return nil, s.fail("FetchTagged", "query rollup", err)
	}
	resp := &FetchResponse{Series: make([]FetchedSeries, 0, len(found))}
	limit := sizeLimit{max: s.opts.MaxMsgSize}
	for i, f := range found {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, ctxStatus(err)
			}
		}
		if len(f.HWindows) > 0 && !req.AcceptHistograms {
			return nil, errHistogramsNotAccepted(f.ID)
		}
		payload, err := rollup.AppendPayload(nil, f.Resolution, f.Windows, f.HWindows)
		if err != nil {
			return nil, s.fail("FetchTagged", "encode rollup", err)
		}
		resp.Series = append(resp.Series, FetchedSeries{ID: f.ID, Shard: f.Shard, Rollup: payload})
		if err := limit.add(&resp.Series[len(resp.Series)-1]); err != nil {
			return nil, err
		}
	}
	return resp, nil
}
