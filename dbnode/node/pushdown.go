package node

import (
	"context"

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

func (r shardReader) LabelNames(_ context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.db.LabelNames(ns, ms, start, end)
}

func (r shardReader) LabelValues(_ context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.db.LabelValues(ns, name, ms, start, end)
}
