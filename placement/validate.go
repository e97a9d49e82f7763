package placement

import (
	"fmt"
	"net"
	"strconv"
)

// Validate checks the invariants every stored placement keeps:
//
//   - NumShards and ReplicaFactor are positive and the placement is sharded;
//   - instances are sorted by unique, non-empty IDs, each with an isolation
//     group, a weight of at least 1, a host:port endpoint and a unique
//     ShardSetID no larger than MaxShardSetID;
//   - a leaving instance holds at least one copy, all of them LEAVING;
//   - each instance holds each shard at most once, in shard order, and only
//     INITIALIZING copies carry a SourceID;
//   - every shard has exactly ReplicaFactor non-LEAVING owners, no two of
//     them in the same isolation group;
//   - every INITIALIZING copy with a SourceID pairs with a LEAVING copy of
//     the same shard on that source, and every LEAVING copy is the source of
//     exactly one INITIALIZING copy.
//
// Balance is not an invariant here: it is a property of the algorithm,
// checked by its tests. Errors wrap ErrInvalid.
func (p Placement) Validate() error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func (p Placement) validate() error {
	if p.NumShards == 0 {
		return fmt.Errorf("numShards must be positive")
	}
	if p.ReplicaFactor < 1 {
		return fmt.Errorf("replicaFactor must be at least 1, got %d", p.ReplicaFactor)
	}
	if !p.IsSharded {
		return fmt.Errorf("unsharded placements are not supported")
	}
	if len(p.Instances) == 0 {
		return fmt.Errorf("no instances")
	}
	shardSetIDs := make(map[uint32]string, len(p.Instances))
	for i, in := range p.Instances {
		if i > 0 && p.Instances[i-1].ID >= in.ID {
			if p.Instances[i-1].ID == in.ID {
				return fmt.Errorf("instance %q appears twice", in.ID)
			}
			return fmt.Errorf("instances are not sorted by ID (%q before %q)", p.Instances[i-1].ID, in.ID)
		}
		if err := p.validateInstance(in); err != nil {
			return fmt.Errorf("instance %q: %w", in.ID, err)
		}
		if other, dup := shardSetIDs[in.ShardSetID]; dup {
			return fmt.Errorf("instances %q and %q share shardSetID %d", other, in.ID, in.ShardSetID)
		}
		shardSetIDs[in.ShardSetID] = in.ID
	}
	return p.validateOwners()
}

func (p Placement) validateInstance(in Instance) error {
	if in.ID == "" {
		return fmt.Errorf("empty instance ID")
	}
	if in.IsolationGroup == "" {
		return fmt.Errorf("no isolation group")
	}
	if in.Weight == 0 {
		return fmt.Errorf("weight must be at least 1")
	}
	if err := checkEndpoint(in.Endpoint); err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	if in.HTTPEndpoint != "" {
		if err := checkEndpoint(in.HTTPEndpoint); err != nil {
			return fmt.Errorf("http endpoint: %w", err)
		}
	}
	if in.Leaving && len(in.Shards) == 0 {
		return fmt.Errorf("leaving instance holds no shards; it should have left the placement")
	}
	if in.ShardSetID > p.MaxShardSetID {
		return fmt.Errorf("shardSetID %d above maxShardSetID %d", in.ShardSetID, p.MaxShardSetID)
	}
	for j, s := range in.Shards {
		if s.ID >= p.NumShards {
			return fmt.Errorf("shard %d out of range [0, %d)", s.ID, p.NumShards)
		}
		if j > 0 && in.Shards[j-1].ID >= s.ID {
			if in.Shards[j-1].ID == s.ID {
				return fmt.Errorf("shard %d held twice", s.ID)
			}
			return fmt.Errorf("shards are not sorted (%d before %d)", in.Shards[j-1].ID, s.ID)
		}
		switch s.State {
		case Initializing:
			if in.Leaving {
				return fmt.Errorf("leaving instance holds shard %d INITIALIZING", s.ID)
			}
			if s.SourceID == in.ID {
				return fmt.Errorf("shard %d streams from its own instance", s.ID)
			}
		case Available, Leaving:
			if s.State == Available && in.Leaving {
				return fmt.Errorf("leaving instance holds shard %d AVAILABLE", s.ID)
			}
			if s.SourceID != "" {
				return fmt.Errorf("%v shard %d has sourceID %q", s.State, s.ID, s.SourceID)
			}
		default:
			return fmt.Errorf("shard %d has invalid state %v", s.ID, s.State)
		}
	}
	return nil
}

// validateOwners checks the per-shard invariants: replica count, distinct
// isolation groups, and the pairing of INITIALIZING and LEAVING copies.
func (p Placement) validateOwners() error {
	owners := make([][]string, p.NumShards) // isolation groups of non-LEAVING owners
	pairs := make(map[pairKey]int)          // LEAVING copy -> INITIALIZING copies naming it
	for _, in := range p.Instances {
		for _, s := range in.Shards {
			switch s.State {
			case Leaving:
				k := pairKey{in.ID, s.ID}
				if _, seen := pairs[k]; !seen {
					pairs[k] = 0
				}
				continue
			case Initializing:
				if s.SourceID != "" {
					pairs[pairKey{s.SourceID, s.ID}]++
				}
			}
			for _, g := range owners[s.ID] {
				if g == in.IsolationGroup {
					return fmt.Errorf("shard %d has two owners in isolation group %q", s.ID, g)
				}
			}
			owners[s.ID] = append(owners[s.ID], in.IsolationGroup)
		}
	}
	for id, gs := range owners {
		if len(gs) != p.ReplicaFactor {
			return fmt.Errorf("shard %d has %d non-LEAVING owners, want %d", id, len(gs), p.ReplicaFactor)
		}
	}
	for _, in := range p.Instances {
		for _, s := range in.Shards {
			if s.State == Initializing && s.SourceID != "" {
				src, ok := p.Instance(s.SourceID)
				if !ok {
					return fmt.Errorf("shard %d on %q streams from unknown instance %q", s.ID, in.ID, s.SourceID)
				}
				if c, _ := src.Shard(s.ID); c.State != Leaving {
					return fmt.Errorf("shard %d on %q streams from %q, which does not hold it LEAVING", s.ID, in.ID, s.SourceID)
				}
			}
		}
	}
	for k, n := range pairs {
		if n != 1 {
			return fmt.Errorf("LEAVING shard %d on %q is the source of %d INITIALIZING copies, want 1", k.shard, k.inst, n)
		}
	}
	return nil
}

type pairKey struct {
	inst  string
	shard uint32
}

// checkEndpoint accepts host:port with a numeric port.
func checkEndpoint(ep string) error {
	if ep == "" {
		return fmt.Errorf("missing (want host:port)")
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", ep, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", ep)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%q has an invalid port", ep)
	}
	return nil
}
