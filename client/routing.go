package client

import (
	"slices"
	"strings"

	"github.com/tessera-tsdb/tessera/placement"
)

// routing is what the session derives once per placement version, so
// that a request costs one slice index per sample: shards grouped by their
// owners (with three nodes at RF 3, every shard is in one group), the
// group of every shard, and the hosts of every group.
type routing struct {
	m *Map
	// groups are the distinct owner sets, with their shards.
	groups []routeGroup
	// byShard is the index in groups of every shard.
	byShard []int32
	// hosts are the instances owning any shard; hostIdx indexes them.
	hosts   []string
	hostIdx map[string]int
	// parts split every group's shards among its readable owners for
	// pushed-down reads: part k of a group holds every n-th of its shards
	// (n readable owners) and asks the owners rotated by k, so that at
	// read level one each owner computes over 1/n of the shards, this
	// node's part locally, and at higher levels each part is asked of the
	// next owners in turn. A part's owners are the group's.
	parts []routeGroup
}

type routeGroup struct {
	owners []placement.Owner // placement order
	// readable are the AVAILABLE and LEAVING owners, this node first.
	readable []placement.Owner
	// hosts are the indices in routing.hosts of owners, in owners' order.
	hosts  []int
	shards []uint32
}

func newRouting(m *Map, localID string) *routing {
	n := m.Placement.NumShards
	r := &routing{m: m, byShard: make([]int32, n), hostIdx: map[string]int{}}
	byKey := map[string]int32{}
	var key strings.Builder
	for sh := uint32(0); sh < n; sh++ {
		owners := m.Owners.Owners(sh)
		key.Reset()
		for _, o := range owners {
			key.WriteString(o.InstanceID)
			key.WriteByte(byte('0' + o.State))
			key.WriteString(o.SourceID)
			key.WriteByte(0)
		}
		gi, ok := byKey[key.String()]
		if !ok {
			gi = int32(len(r.groups))
			byKey[key.String()] = gi
			g := routeGroup{owners: owners}
			for _, o := range owners {
				hi, ok := r.hostIdx[o.InstanceID]
				if !ok {
					hi = len(r.hosts)
					r.hostIdx[o.InstanceID] = hi
					r.hosts = append(r.hosts, o.InstanceID)
				}
				g.hosts = append(g.hosts, hi)
				if o.State == placement.Available || o.State == placement.Leaving {
					if o.InstanceID == localID {
						g.readable = append([]placement.Owner{o}, g.readable...)
					} else {
						g.readable = append(g.readable, o)
					}
				}
			}
			r.groups = append(r.groups, g)
		}
		r.groups[gi].shards = append(r.groups[gi].shards, sh)
		r.byShard[sh] = gi
	}
	for _, g := range r.groups {
		r.parts = append(r.parts, splitGroup(g)...)
	}
	return r
}

// splitGroup is g as one part per readable owner (g itself when it has at
// most one, or fewer shards than owners would leave a part empty).
func splitGroup(g routeGroup) []routeGroup {
	n := min(len(g.readable), len(g.shards))
	if n <= 1 {
		return []routeGroup{g}
	}
	parts := make([]routeGroup, n)
	for k := range parts {
		parts[k] = routeGroup{owners: g.owners, hosts: g.hosts,
			readable: append(slices.Clone(g.readable[k:]), g.readable[:k]...)}
	}
	for i, sh := range g.shards {
		parts[i%n].shards = append(parts[i%n].shards, sh)
	}
	return parts
}
