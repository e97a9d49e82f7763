package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// rollupReader reads rollup namespaces for the PromQL API
// (promapi.RollupReader) from this node's own storage. That is the whole
// answer only when this node is the sole owner of every shard (the
// embedded single-node placement); reading a rollup through the cluster
// session (fan-out and merge of replicas' windows) is not built yet, so a
// multi-node cluster gets an error naming that, never a partial answer.
type rollupReader struct{ n *Node }

var errRollupNotReady = errors.New("rollup namespaces: storage is not open yet")

func (r rollupReader) QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.RollupSeries, error) {
	// The backend is served (an atomic store) after storage opened, so
	// seeing it makes n.db safe to read.
	if r.n.state.Backend() == nil {
		return nil, errRollupNotReady
	}
	db := r.n.DB()
	if db == nil {
		return nil, errRollupNotReady
	}
	if r.n.topo != nil {
		if m := r.n.topo.Get(); m == nil || m.Sole != r.n.cfg.ID {
			return nil, fmt.Errorf("namespace %q is a rollup: reading rollups is wired for a node owning every shard only, not through the cluster session yet (docs/rollups.md)", ns)
		}
	}
	return db.QueryRollup(ctx, ns, ms, start, end, storage.QueryOptions{})
}

// rollupResolutions maps each rollup namespace of the config to its
// resolution (promapi.Options.Rollups).
func rollupResolutions(nss []config.Namespace) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, ns := range nss {
		if ns.IsRollup() {
			out[ns.Name] = ns.Resolution
		}
	}
	return out
}
