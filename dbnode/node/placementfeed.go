package node

import (
	"log/slog"
	"sync"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/placement"
)

// placementFeed hands placements to the node's topology, each version
// once and only newer ones. Two sources feed it: the etcd watch, and this
// node's own mark-available CAS, whose result the node acts on at once
// (/ready, the next round) instead of waiting for the watch to echo the
// write back: on a loaded machine that echo (a 1 MB value decoded and
// validated) was a tenth of a second of every join.
type placementFeed struct {
	topo   *client.Topology
	gauges *placementGauges
	log    *slog.Logger
	id     string

	mu   sync.Mutex
	last int64
	mine [placement.Leaving + 1]int // this node's shards per state, as last logged
}

func newPlacementFeed(topo *client.Topology, gauges *placementGauges, log *slog.Logger, id string) *placementFeed {
	return &placementFeed{topo: topo, gauges: gauges, log: log, id: id}
}

// offer caches p unless a placement as new was offered before.
func (f *placementFeed) offer(p placement.Placement, from string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.Version <= f.last {
		return
	}
	f.last = p.Version
	if err := f.topo.Update(p); err != nil {
		f.log.Warn("cache placement", "err", err)
	}
	f.gauges.update(p)
	// One line per change of this node's shard states: the timestamps
	// of a join (the add seen, the CAS applied) come from these lines.
	var counts [placement.Leaving + 1]int
	if in, ok := p.Instance(f.id); ok {
		counts = in.CountByState()
	}
	if counts != f.mine {
		f.mine = counts
		f.log.Info("placement changed this node's shards", "version", p.Version, "from", from,
			"initializing", counts[placement.Initializing], "available", counts[placement.Available], "leaving", counts[placement.Leaving])
	}
}
