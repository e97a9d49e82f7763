package node

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// evaluator computes pushed-down queries over this node's database, for
// the RPC server (other nodes' requests) and the session (this node's
// share of its own): promapi's evaluator over the shards asked for, with
// the query section's parallelism and samples limit.
func (n *Node) evaluator(db *storage.Database) rpc.Evaluator {
	opts := promapi.Options{Parallelism: n.cfg.Query.Parallelism, MaxSamples: n.cfg.Query.MaxSamples}
	return func(ctx context.Context, req *query.Request, shards func(uint32) bool) (*query.Result, error) {
		return promapi.Evaluate(ctx, shardReader{db: db, shards: shards}, req, opts)
	}
}

// sessionEvaluator is the session's evaluator: nil (queries read raw
// series) when query.pushdown is off. The RPC server answers other
// nodes' pushdowns either way.
func (n *Node) sessionEvaluator(db *storage.Database) rpc.Evaluator {
	if !n.cfg.Query.PushdownEnabled() {
		return nil
	}
	return n.evaluator(db)
}

// sessionPartsEvaluator is partsEvaluator for the session: nil when
// query.pushdown is off, as sessionEvaluator.
func (n *Node) sessionPartsEvaluator(db *storage.Database) rpc.PartsEvaluator {
	if !n.cfg.Query.PushdownEnabled() {
		return nil
	}
	return n.partsEvaluator(db)
}

// rawEvaluator is the session's evaluator over raw series it read from
// the cluster (a pushed-down part whose replicas disagreed); nil when the
// session does not push down.
func (n *Node) rawEvaluator() func(context.Context, query.Reader, *query.Request) (*query.Result, error) {
	if !n.cfg.Query.PushdownEnabled() {
		return nil
	}
	opts := promapi.Options{Parallelism: n.cfg.Query.Parallelism, MaxSamples: n.cfg.Query.MaxSamples}
	return func(ctx context.Context, r query.Reader, req *query.Request) (*query.Result, error) {
		return promapi.Evaluate(ctx, r, req, opts)
	}
}

// shardReader reads the series of some shards of a database, for
// promapi.Evaluate, which declines series holding native histograms: a
// selection storage knows holds some is declined before it is read
// (storage.QueryOptions.DeclineHistograms), so that the coordinator's raw
// read of it is the only one.
type shardReader struct {
	db     *storage.Database
	shards func(uint32) bool
}

func (r shardReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	return r.db.Query(ctx, ns, ms, start, end, storage.QueryOptions{Shards: r.shards, DeclineHistograms: true})
}

// QueryStreams is Query answering with streams (query.StreamReader).
func (r shardReader) QueryStreams(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, unsorted bool) ([]storage.SeriesIterator, error) {
	return r.db.Query(ctx, ns, ms, start, end, storage.QueryOptions{Shards: r.shards, DeclineHistograms: true, Streams: true, Unsorted: unsorted})
}

func (r shardReader) LabelNames(_ context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.db.LabelNames(ns, ms, start, end)
}

func (r shardReader) LabelValues(_ context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.db.LabelValues(ns, name, ms, start, end)
}

// partsEvaluator computes a request for several parts of this node's
// shards with one read of their series (rpc.PartsEvaluator): the index
// is asked once and each series read once for all parts, then each part
// is computed over its own series, as evaluator would compute it alone.
// With three nodes at RF 3 and a read level of two, a host is asked two
// parts of every query (one in full, one for its digest): two index
// look-ups and two series walks per query were most of a small query's
// cost on a replica.
func (n *Node) partsEvaluator(db *storage.Database) rpc.PartsEvaluator {
	opts := promapi.Options{Parallelism: n.cfg.Query.Parallelism, MaxSamples: n.cfg.Query.MaxSamples}
	return func(ctx context.Context, req *query.Request, parts []rpc.Part) ([]*query.Result, error) {
		return evaluateParts(ctx, db, req, parts, opts)
	}
}

func evaluateParts(ctx context.Context, db *storage.Database, req *query.Request, parts []rpc.Part, opts promapi.Options) ([]*query.Result, error) {
	shared := &sharedRead{db: db, union: func(sh uint32) bool {
		for _, p := range parts {
			if p.Shards(sh) {
				return true
			}
		}
		return false
	}}
	out := make([]*query.Result, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			r := *req
			r.DigestOnly = p.DigestOnly
			out[i], errs[i] = promapi.Evaluate(ctx, partReader{sharedRead: shared, shards: p.Shards}, &r, opts)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sharedRead is one read of the series of several parts' shards, made by
// the first part to ask and split among them.
type sharedRead struct {
	db    *storage.Database
	union func(uint32) bool
	once  sync.Once
	key   readArgs
	its   []storage.SeriesIterator
	err   error
}

type readArgs struct {
	ns         string
	ms         []*labels.Matcher
	start, end int64
	// streams and unsorted are how the read was asked (Query, or
	// QueryStreams and its order).
	streams, unsorted bool
}

func (a readArgs) same(b readArgs) bool {
	return a.ns == b.ns && a.start == b.start && a.end == b.end && slices.Equal(a.ms, b.ms) &&
		a.streams == b.streams && a.unsorted == b.unsorted
}

// Both read as Evaluate's workers decode best: streams.
var (
	_ query.StreamReader = shardReader{}
	_ query.StreamReader = partReader{}
)

// partReader reads one part's series from the shared read.
type partReader struct {
	*sharedRead
	shards func(uint32) bool
}

func (r partReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	return r.read(ctx, readArgs{ns: ns, ms: ms, start: start, end: end})
}

// QueryStreams is Query answering with streams (query.StreamReader), as
// shardReader's: Evaluate reads through it.
func (r partReader) QueryStreams(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, unsorted bool) ([]storage.SeriesIterator, error) {
	return r.read(ctx, readArgs{ns: ns, ms: ms, start: start, end: end, streams: true, unsorted: unsorted})
}

func (r partReader) read(ctx context.Context, args readArgs) ([]storage.SeriesIterator, error) {
	opts := func(shards func(uint32) bool) storage.QueryOptions {
		return storage.QueryOptions{Shards: shards, DeclineHistograms: true, Streams: args.streams, Unsorted: args.unsorted}
	}
	r.once.Do(func() {
		r.key = args
		r.its, r.err = r.db.Query(ctx, args.ns, args.ms, args.start, args.end, opts(r.union))
	})
	if !r.key.same(args) {
		// Not the read the parts share (Evaluate reads once, with the
		// request's selector: not expected): this part's own read.
		return r.db.Query(ctx, args.ns, args.ms, args.start, args.end, opts(r.shards))
	}
	var partial *storage.PartialError
	if r.err != nil && !errors.As(r.err, &partial) {
		return nil, r.err
	}
	var out []storage.SeriesIterator
	for _, it := range r.its {
		if r.shards(it.Shard) {
			out = append(out, it)
		}
	}
	if partial != nil {
		// Each part reports the damage in its own shards only.
		var mine []storage.DamagedSeries
		for _, d := range partial.Damaged {
			if r.shards(d.Shard) {
				mine = append(mine, d)
			}
		}
		if len(mine) > 0 {
			return out, &storage.PartialError{Damaged: mine}
		}
	}
	return out, nil
}

func (r partReader) LabelNames(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return shardReader{db: r.db, shards: r.shards}.LabelNames(ctx, ns, ms, start, end)
}

func (r partReader) LabelValues(ctx context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return shardReader{db: r.db, shards: r.shards}.LabelValues(ctx, ns, name, ms, start, end)
}
