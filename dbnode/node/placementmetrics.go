package node

import (
	"strings"

	"github.com/uber-go/tally/v4"

	"github.com/tessera-tsdb/tessera/placement"
)

// placementGauges export the placement as this node last saw it, for
// dashboards (deploy/grafana): tessera_placement_shards{state} counts this
// node's own shards per state, tessera_placement_shards_moving the
// cluster's INITIALIZING copies, tessera_placement_version the placement
// version, tessera_placement_instances the instances in it.
type placementGauges struct {
	id       string
	byState  [placement.Leaving + 1]tally.Gauge
	moving   tally.Gauge
	version  tally.Gauge
	instance tally.Gauge
}

func newPlacementGauges(scope tally.Scope, id string) *placementGauges {
	g := &placementGauges{
		id:       id,
		moving:   scope.Gauge("shards_moving"),
		version:  scope.Gauge("version"),
		instance: scope.Gauge("instances"),
	}
	for st := placement.Initializing; st <= placement.Leaving; st++ {
		g.byState[st] = scope.Tagged(map[string]string{"state": strings.ToLower(st.String())}).Gauge("shards")
	}
	return g
}

func (g *placementGauges) update(p placement.Placement) {
	var counts [placement.Leaving + 1]int
	if in, ok := p.Instance(g.id); ok {
		counts = in.CountByState()
	}
	for st := placement.Initializing; st <= placement.Leaving; st++ {
		g.byState[st].Update(float64(counts[st]))
	}
	g.moving.Update(float64(placement.MovingShards(p)))
	g.version.Update(float64(p.Version))
	g.instance.Update(float64(len(p.Instances)))
}
