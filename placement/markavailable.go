package placement

import (
	"fmt"
	"slices"
)

// MarkAvailable marks the instance's INITIALIZING copies of the given shards
// AVAILABLE (all of its INITIALIZING copies when no shard is given) and
// deletes the LEAVING copies they streamed from. A removed (Leaving) source
// left holding nothing leaves the placement. Shards the instance already holds
// AVAILABLE are skipped, so a retry after a lost reply is harmless; a shard
// the instance does not hold, or holds LEAVING, is an error.
func MarkAvailable(p Placement, id string, shards ...uint32) (Placement, error) {
	in, ok := p.Instance(id)
	if !ok {
		return Placement{}, fmt.Errorf("mark available: %w %q", ErrUnknownInstance, id)
	}
	want := make(map[uint32]bool, len(shards))
	for _, s := range shards {
		c, ok := in.Shard(s)
		switch {
		case !ok:
			return Placement{}, fmt.Errorf("mark available: instance %q does not hold shard %d", id, s)
		case c.State == Leaving:
			return Placement{}, fmt.Errorf("mark available: shard %d on instance %q is LEAVING", s, id)
		case c.State == Initializing:
			want[s] = true
		}
	}
	if len(shards) == 0 {
		for _, s := range in.Shards {
			if s.State == Initializing {
				want[s.ID] = true
			}
		}
	}
	return markAvailable(p, map[string]map[uint32]bool{id: want}), nil
}

// MarkAllAvailable marks every INITIALIZING copy of every instance
// AVAILABLE, as if every bootstrap had finished. A one-node cluster uses it
// right after Init; tests use it to settle a placement.
func MarkAllAvailable(p Placement) Placement {
	want := make(map[string]map[uint32]bool)
	for _, in := range p.Instances {
		for _, s := range in.Shards {
			if s.State == Initializing {
				if want[in.ID] == nil {
					want[in.ID] = make(map[uint32]bool)
				}
				want[in.ID][s.ID] = true
			}
		}
	}
	return markAvailable(p, want)
}

// markAvailable flips the chosen INITIALIZING copies and deletes the LEAVING
// copies paired with them.
func markAvailable(p Placement, want map[string]map[uint32]bool) Placement {
	out := p.Clone()
	drop := make(map[pairKey]bool)
	for i := range out.Instances {
		in := &out.Instances[i]
		for j := range in.Shards {
			s := &in.Shards[j]
			if s.State != Initializing || !want[in.ID][s.ID] {
				continue
			}
			if s.SourceID != "" {
				drop[pairKey{s.SourceID, s.ID}] = true
			}
			s.State, s.SourceID = Available, ""
		}
	}
	if len(drop) == 0 {
		return out
	}
	kept := out.Instances[:0]
	for _, in := range out.Instances {
		in.Shards = slices.DeleteFunc(in.Shards, func(s Shard) bool {
			return s.State == Leaving && drop[pairKey{in.ID, s.ID}]
		})
		if in.Leaving && len(in.Shards) == 0 {
			continue // drained: it leaves the placement
		}
		kept = append(kept, in)
	}
	out.Instances = kept
	return out
}
