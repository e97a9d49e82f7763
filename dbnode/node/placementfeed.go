package node

import (
	"context"
	"log/slog"
	"sync"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/placement"
)

// placementFeed hands placements to the node's topology, each version
// once and only newer ones. Two sources offer them: the etcd watch, and
// this node's own mark-available CAS, whose result the node acts on at
// once (/ready, the next round) instead of waiting for the watch to echo
// the write back: on a loaded machine that echo (a 1 MB value decoded
// and validated) was a tenth of a second of every join.
//
// Offering never blocks: run installs the newest offered placement in the
// background, so the CAS's caller does not wait for the topology's disk
// cache (a 1 MB file written and fsynced), which subscribers need not
// wait for either (they are told first).
type placementFeed struct {
	topo   *client.Topology
	gauges *placementGauges
	log    *slog.Logger
	id     string
	wake   chan struct{}

	mu      sync.Mutex
	offered int64 // newest version offered
	pending *offered
}

type offered struct {
	p    placement.Placement
	from string
}

func newPlacementFeed(topo *client.Topology, gauges *placementGauges, log *slog.Logger, id string) *placementFeed {
	return &placementFeed{topo: topo, gauges: gauges, log: log, id: id, wake: make(chan struct{}, 1)}
}

// offer queues p for run unless a placement as new was offered before;
// from names the source in the log.
func (f *placementFeed) offer(p placement.Placement, from string) {
	f.mu.Lock()
	if p.Version <= f.offered {
		f.mu.Unlock()
		return
	}
	f.offered, f.pending = p.Version, &offered{p, from}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default: // run is already due to look
	}
}

// run installs offered placements until ctx ends, skipping any that a
// newer one overtook while it was busy.
func (f *placementFeed) run(ctx context.Context) {
	var mine [placement.Leaving + 1]int // this node's shards per state, as last logged
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		f.mu.Lock()
		o := f.pending
		f.pending = nil
		f.mu.Unlock()
		if o == nil {
			continue
		}
		if err := f.topo.Update(o.p); err != nil {
			f.log.Warn("cache placement", "err", err)
		}
		f.gauges.update(o.p)
		// One line per change of this node's shard states: the
		// timestamps of a join (the add seen, the CAS applied) come
		// from these lines.
		var counts [placement.Leaving + 1]int
		if in, ok := o.p.Instance(f.id); ok {
			counts = in.CountByState()
		}
		if counts != mine {
			mine = counts
			f.log.Info("placement changed this node's shards", "version", o.p.Version, "from", o.from,
				"initializing", counts[placement.Initializing], "available", counts[placement.Available], "leaving", counts[placement.Leaving])
		}
	}
}
