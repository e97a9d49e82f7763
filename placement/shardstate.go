package placement

import "fmt"

// ShardState is the state of one copy of a shard on one instance.
type ShardState uint8

const (
	// Absent is not a stored state: it names "this instance holds no copy"
	// so the transition whitelist can describe copies appearing and leaving.
	Absent ShardState = iota
	// Initializing copies receive writes but do not count towards write or
	// read consistency: the instance is still bootstrapping the shard.
	Initializing
	// Available copies are bootstrapped and count towards consistency.
	Available
	// Leaving copies still serve while their receiver bootstraps; they are
	// deleted when the receiver's copy is marked available.
	Leaving
)

var stateNames = [...]string{
	Absent:       "ABSENT",
	Initializing: "INITIALIZING",
	Available:    "AVAILABLE",
	Leaving:      "LEAVING",
}

func (s ShardState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("ShardState(%d)", s)
}

// MarshalText writes the state's name, so the JSON stays readable.
func (s ShardState) MarshalText() ([]byte, error) {
	if s == Absent || int(s) >= len(stateNames) {
		return nil, fmt.Errorf("shard state %v cannot be stored", s)
	}
	return []byte(stateNames[s]), nil
}

// UnmarshalText accepts the names MarshalText writes.
func (s *ShardState) UnmarshalText(b []byte) error {
	for st := Initializing; st <= Leaving; st++ {
		if string(b) == stateNames[st] {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("unknown shard state %q (want INITIALIZING, AVAILABLE or LEAVING)", b)
}

type transition struct{ from, to ShardState }

// transitions is the whitelist of state changes of one copy of a shard on
// one instance between two consecutive placements. Anything not listed is a
// bug in the algorithm and is refused before it reaches etcd.
var transitions = map[transition]string{
	// Init, add, remove or replace assigned the shard to this instance; it
	// bootstraps from SourceID (or from nothing in a brand-new placement).
	{Absent, Initializing}: "assigned",
	// The instance finished bootstrapping the shard and called
	// mark-available.
	{Initializing, Available}: "marked available",
	// Add, remove or replace gave the shard to another instance, which now
	// holds it INITIALIZING with SourceID naming this one.
	{Available, Leaving}: "given to another instance",
	// The receiver was removed while still INITIALIZING (undo of an add),
	// so this instance owns the shard again.
	{Leaving, Available}: "move undone",
	// The receiver of the move was marked available; the copy is deleted.
	{Leaving, Absent}: "receiver marked available",
	// The instance was removed, or the shard moved on, before its
	// bootstrap finished; the copy is dropped and its source (if any) pairs
	// with the new receiver instead.
	{Initializing, Absent}: "dropped before bootstrap finished",
}

// CanTransition reports whether a copy may go from one state to another
// between two consecutive placements. Staying in the same state is allowed.
func CanTransition(from, to ShardState) bool {
	if from == to {
		return true
	}
	_, ok := transitions[transition{from, to}]
	return ok
}

// CheckTransitions compares every copy in prev and next and returns an error
// naming the first copy whose state change is not whitelisted. The store
// runs it on every write, next to Validate.
func CheckTransitions(prev, next Placement) error {
	type key struct {
		inst  string
		shard uint32
	}
	before := make(map[key]ShardState, prev.NumShards*uint32(max(prev.ReplicaFactor, 1)))
	for _, in := range prev.Instances {
		for _, s := range in.Shards {
			before[key{in.ID, s.ID}] = s.State
		}
	}
	for _, in := range next.Instances {
		for _, s := range in.Shards {
			k := key{in.ID, s.ID}
			from := before[k]
			if !CanTransition(from, s.State) {
				return fmt.Errorf("shard %d on instance %q: transition %v -> %v is not allowed", s.ID, in.ID, from, s.State)
			}
			delete(before, k)
		}
	}
	for k, from := range before {
		if !CanTransition(from, Absent) {
			return fmt.Errorf("shard %d on instance %q: transition %v -> %v is not allowed", k.shard, k.inst, from, Absent)
		}
	}
	return nil
}
