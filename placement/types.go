package placement

import (
	"slices"
	"strings"
)

// Placement is the assignment of NumShards virtual shards to instances,
// ReplicaFactor times each. It is plain data: the algorithm returns new
// values and never mutates its input.
type Placement struct {
	// NumShards is fixed when the placement is created; series hash into
	// shards 0..NumShards-1.
	NumShards uint32
	// ReplicaFactor is the number of non-LEAVING owners of every shard.
	ReplicaFactor int
	// IsSharded is always true today; it is kept so a future unsharded
	// placement (every instance owning everything) can be told apart.
	IsSharded bool
	// MaxShardSetID is the highest ShardSetID ever handed out; each added
	// instance gets the next one, so IDs are never reused.
	MaxShardSetID uint32
	// Version is the etcd ModRevision of the key the placement was read
	// from (0 for a placement that was never stored). It is not part of the
	// stored value.
	Version int64
	// Instances are sorted by ID.
	Instances []Instance
}

// Instance is one node of the cluster and the shards it holds.
type Instance struct {
	ID string
	// IsolationGroup is the failure domain (rack); no two non-LEAVING owners
	// of a shard share one.
	IsolationGroup string
	// Zone is informational (the data centre); all instances usually share
	// one.
	Zone string
	// Weight scales the instance's share of shards; at least 1.
	Weight uint32
	// Endpoint is the node RPC host:port.
	Endpoint string
	// HTTPEndpoint is the node's HTTP host:port, optional; dashboards and
	// docker compose use it.
	HTTPEndpoint string
	// Hostname and Port repeat Endpoint split up, for tools that want them.
	Hostname string
	Port     uint32
	// ShardSetID is a number unique to this instance within the placement.
	ShardSetID uint32
	// Leaving is set when the instance was removed (or replaced): it holds
	// only LEAVING copies and leaves the placement once the last of them is
	// taken over. An instance that merely holds nothing, or only LEAVING
	// copies because its share rounded down to zero, is not leaving.
	Leaving bool
	// Shards are sorted by ID; an instance holds at most one copy of a
	// shard.
	Shards []Shard
}

// Shard is one copy of a shard on one instance.
type Shard struct {
	ID    uint32
	State ShardState
	// SourceID names the instance an INITIALIZING copy streams from, which
	// holds the same shard LEAVING. Empty when there is nothing to stream
	// (a brand-new placement) and for AVAILABLE and LEAVING copies.
	SourceID string
	// CutoverNanos is when an INITIALIZING copy was assigned (unix nanos,
	// 0 when unknown).
	CutoverNanos int64
	// CutoffNanos is when a LEAVING copy started to leave (unix nanos, 0
	// when unknown).
	CutoffNanos int64
}

// Clone returns a deep copy of p.
func (p Placement) Clone() Placement {
	out := p
	out.Instances = make([]Instance, len(p.Instances))
	for i, in := range p.Instances {
		out.Instances[i] = in.Clone()
	}
	return out
}

// Clone returns a deep copy of in.
func (in Instance) Clone() Instance {
	out := in
	out.Shards = slices.Clone(in.Shards)
	return out
}

// Instance returns the instance with the given ID. The returned value
// shares its Shards slice with p: treat it as read-only.
func (p Placement) Instance(id string) (Instance, bool) {
	i, ok := p.instanceIndex(id)
	if !ok {
		return Instance{}, false
	}
	return p.Instances[i], true
}

func (p Placement) instanceIndex(id string) (int, bool) {
	return slices.BinarySearchFunc(p.Instances, id, func(in Instance, id string) int {
		return strings.Compare(in.ID, id)
	})
}

// Shard returns the instance's copy of the given shard.
func (in Instance) Shard(id uint32) (Shard, bool) {
	i, ok := slices.BinarySearchFunc(in.Shards, id, func(s Shard, id uint32) int {
		return cmpUint32(s.ID, id)
	})
	if !ok {
		return Shard{}, false
	}
	return in.Shards[i], true
}

// CountByState returns how many shards the instance holds in each state,
// indexed by ShardState.
func (in Instance) CountByState() [Leaving + 1]int {
	var n [Leaving + 1]int
	for _, s := range in.Shards {
		if s.State <= Leaving {
			n[s.State]++
		}
	}
	return n
}

// IsLeaving reports whether the instance was removed and only waits for its
// LEAVING copies to be taken over.
func (in Instance) IsLeaving() bool { return in.Leaving }

func cmpUint32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortInstances puts instances in ID order and each instance's shards in
// shard order, the canonical form every function returns.
func sortInstances(ins []Instance) {
	slices.SortFunc(ins, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
	for i := range ins {
		slices.SortFunc(ins[i].Shards, func(a, b Shard) int { return cmpUint32(a.ID, b.ID) })
	}
}
