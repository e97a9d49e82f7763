package placement

import "slices"

// Owner is one copy of a shard as routing sees it: which instance, where to
// reach it, and in which state the copy is.
type Owner struct {
	InstanceID     string
	IsolationGroup string
	Endpoint       string
	State          ShardState
	// SourceID is set on INITIALIZING copies that stream from another owner.
	SourceID string
}

// ShardOwners returns every copy of the shard (LEAVING ones included) in
// instance ID order. It scans the placement; for per-request routing build
// an OwnerIndex once per placement instead.
func ShardOwners(p Placement, shard uint32) []Owner {
	var out []Owner
	for _, in := range p.Instances {
		if s, ok := in.Shard(shard); ok {
			out = append(out, ownerOf(in, s))
		}
	}
	return out
}

// OwnerIndex maps every shard to its copies, for routing: index by shard ID.
// It is immutable once built and safe for concurrent readers.
type OwnerIndex [][]Owner

// IndexOwners builds an OwnerIndex for p.
func IndexOwners(p Placement) OwnerIndex {
	idx := make(OwnerIndex, p.NumShards)
	for _, in := range p.Instances {
		for _, s := range in.Shards {
			if s.ID < p.NumShards {
				idx[s.ID] = append(idx[s.ID], ownerOf(in, s))
			}
		}
	}
	return idx
}

// Owners returns the copies of one shard in instance ID order; nil for a
// shard out of range. The slice is shared: do not modify it.
func (x OwnerIndex) Owners(shard uint32) []Owner {
	if int(shard) >= len(x) {
		return nil
	}
	return x[shard]
}

func ownerOf(in Instance, s Shard) Owner {
	return Owner{
		InstanceID:     in.ID,
		IsolationGroup: in.IsolationGroup,
		Endpoint:       in.Endpoint,
		State:          s.State,
		SourceID:       s.SourceID,
	}
}

// InstanceShards returns a copy of the shards the instance holds, in shard
// order, and false when the placement has no such instance.
func InstanceShards(p Placement, id string) ([]Shard, bool) {
	in, ok := p.Instance(id)
	if !ok {
		return nil, false
	}
	return slices.Clone(in.Shards), true
}

// MovingShards counts the INITIALIZING copies in the placement: shards that
// some instance is still bootstrapping. Zero means the placement is settled.
func MovingShards(p Placement) int {
	n := 0
	for _, in := range p.Instances {
		for _, s := range in.Shards {
			if s.State == Initializing {
				n++
			}
		}
	}
	return n
}
