package placement

import (
	"fmt"
	"net"
	"strconv"
)

// The operations below are pure: they never modify their input, and the
// same input always gives the same output. Each returns a placement that
// passes Validate, or an error and no placement. They keep p.Version; the
// store replaces it with the etcd revision it writes.
//
// Add, Remove and Replace also work while earlier moves are unfinished
// (the store only lets them through with Force): a copy that is moved again
// before its bootstrap finished is dropped and its receiver streams from the
// original source instead.

// Init builds a placement of numShards shards with replicaFactor owners each
// over the given instances. Every shard starts INITIALIZING with no source:
// there is nothing to stream in a new cluster, and nodes mark their shards
// available once they are up.
func Init(instances []Instance, numShards uint32, replicaFactor int) (Placement, error) {
	if numShards == 0 {
		return Placement{}, fmt.Errorf("init placement: numShards must be positive")
	}
	if replicaFactor < 1 {
		return Placement{}, fmt.Errorf("init placement: replica factor must be at least 1, got %d", replicaFactor)
	}
	if len(instances) == 0 {
		return Placement{}, fmt.Errorf("init placement: no instances")
	}
	empty := Placement{NumShards: numShards, ReplicaFactor: replicaFactor, IsSharded: true}
	newcomers, err := prepareNewcomers(empty, instances)
	if err != nil {
		return Placement{}, fmt.Errorf("init placement: %w", err)
	}
	w := newWork(empty, newcomers)
	if err := w.checkGroups(); err != nil {
		return Placement{}, fmt.Errorf("init placement: %w", err)
	}
	for s := range numShards {
		for range replicaFactor {
			w.homeless = append(w.homeless, homeless{shard: s, src: -1})
		}
	}
	return finish("init placement", w, empty.Version, nil)
}

// Add adds instances to p. Each newcomer receives INITIALIZING copies,
// taken from the instances whose share shrinks; their copies turn LEAVING
// and the newcomer streams from them (SourceID).
func Add(p Placement, newcomers ...Instance) (Placement, error) {
	if len(newcomers) == 0 {
		return Placement{}, fmt.Errorf("add instances: no instances given")
	}
	ins, err := prepareNewcomers(p, newcomers)
	if err != nil {
		return Placement{}, fmt.Errorf("add instances: %w", err)
	}
	w := newWork(p, ins)
	if err := w.checkGroups(); err != nil {
		return Placement{}, fmt.Errorf("add instances: %w", err)
	}
	return finish("add instances", w, p.Version, nil)
}

// Remove takes instances out of p. An instance whose copies are still
// INITIALIZING gives them back to their sources (an undo of the add that
// brought it); its AVAILABLE copies turn LEAVING and go to the instances
// whose share grows, which stream them from it. The removed instance stays
// in the placement until nothing streams from it any more, or leaves at
// once when it holds nothing.
func Remove(p Placement, ids ...string) (Placement, error) {
	if len(ids) == 0 {
		return Placement{}, fmt.Errorf("remove instances: no instances given")
	}
	w := newWork(p, nil)
	if err := w.deactivateIDs(ids); err != nil {
		return Placement{}, fmt.Errorf("remove instances: %w", err)
	}
	if err := w.checkGroups(); err != nil {
		return Placement{}, fmt.Errorf("remove instances %v: %w", ids, err)
	}
	return finish("remove instances", w, p.Version, nil)
}

// Replace removes the leaving instances and adds the newcomers in one
// change. The newcomers take over the leaving instances' copies wherever the
// isolation-group rule and the weights allow; with one newcomer of the same
// group and weight per leaving instance, nothing else moves.
func Replace(p Placement, leaving []string, newcomers []Instance) (Placement, error) {
	if len(leaving) == 0 || len(newcomers) == 0 {
		return Placement{}, fmt.Errorf("replace instances: need at least one leaving instance and one newcomer")
	}
	ins, err := prepareNewcomers(p, newcomers)
	if err != nil {
		return Placement{}, fmt.Errorf("replace instances: %w", err)
	}
	w := newWork(p, ins)
	var inherited int
	for _, id := range leaving {
		if i, ok := w.indexOf(id); ok {
			inherited += w.count[i]
		}
	}
	if err := w.deactivateIDs(leaving); err != nil {
		return Placement{}, fmt.Errorf("replace instances: %w", err)
	}
	if err := w.checkGroups(); err != nil {
		return Placement{}, fmt.Errorf("replace instances: %w", err)
	}
	// Let the newcomers inherit the leaving instances' counts when rounding
	// targets, so a like-for-like replacement moves nothing else.
	var newW uint64
	for _, in := range ins {
		newW += uint64(in.Weight)
	}
	pref := make(map[int]int, len(ins))
	for _, in := range ins {
		i, _ := w.indexOf(in.ID)
		q, _ := mulDiv(uint64(inherited), uint64(in.Weight), newW)
		pref[i] = int(q)
	}
	return finish("replace instances", w, p.Version, pref)
}

// finish computes targets, rebalances and validates.
func finish(op string, w *work, version int64, pref map[int]int) (Placement, error) {
	w.setTargets(pref)
	if err := w.rebalance(); err != nil {
		return Placement{}, fmt.Errorf("%s: %w", op, err)
	}
	out := w.placement(version)
	if err := out.Validate(); err != nil {
		return Placement{}, fmt.Errorf("%s: result breaks an invariant (bug): %w", op, err)
	}
	return out, nil
}

func (w *work) deactivateIDs(ids []string) error {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		i, ok := w.indexOf(id)
		if !ok || !w.wasPresent[i] {
			return fmt.Errorf("%w %q", ErrUnknownInstance, id)
		}
		if seen[id] {
			return fmt.Errorf("instance %q named twice", id)
		}
		seen[id] = true
		if !w.active[i] {
			return fmt.Errorf("instance %q is already leaving", id)
		}
		w.deactivate(i)
	}
	return nil
}

func (w *work) checkGroups() error {
	if n := w.activeGroups(); n < w.rf {
		return fmt.Errorf("%w: %d isolation group(s) for replica factor %d; every shard needs its replicas in distinct groups", ErrNotEnoughGroups, n, w.rf)
	}
	return nil
}

// prepareNewcomers checks instances about to join p, fills Hostname and Port
// from Endpoint, and hands out ShardSetIDs.
func prepareNewcomers(p Placement, newcomers []Instance) ([]Instance, error) {
	out := make([]Instance, len(newcomers))
	seen := make(map[string]bool, len(newcomers))
	setID := p.MaxShardSetID
	for k, in := range newcomers {
		if in.ID == "" {
			return nil, fmt.Errorf("instance with empty ID")
		}
		if _, ok := p.Instance(in.ID); ok || seen[in.ID] {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateInstance, in.ID)
		}
		seen[in.ID] = true
		if len(in.Shards) > 0 {
			return nil, fmt.Errorf("new instance %q must not list shards", in.ID)
		}
		if in.IsolationGroup == "" {
			return nil, fmt.Errorf("instance %q: no isolation group", in.ID)
		}
		if in.Weight == 0 {
			return nil, fmt.Errorf("instance %q: weight must be at least 1", in.ID)
		}
		if err := checkEndpoint(in.Endpoint); err != nil {
			return nil, fmt.Errorf("instance %q: endpoint: %w", in.ID, err)
		}
		if in.HTTPEndpoint != "" {
			if err := checkEndpoint(in.HTTPEndpoint); err != nil {
				return nil, fmt.Errorf("instance %q: http endpoint: %w", in.ID, err)
			}
		}
		if in.Hostname == "" && in.Port == 0 {
			host, port, _ := net.SplitHostPort(in.Endpoint)
			n, _ := strconv.ParseUint(port, 10, 16)
			in.Hostname, in.Port = host, uint32(n)
		}
		out[k] = in
	}
	// ShardSetIDs in ID order, so the result does not depend on argument
	// order.
	sorted := append([]Instance(nil), out...)
	sortInstances(sorted)
	ids := make(map[string]uint32, len(sorted))
	for _, in := range sorted {
		setID++
		ids[in.ID] = setID
	}
	for k := range out {
		out[k].ShardSetID = ids[out[k].ID]
	}
	return out, nil
}
