package rpc

// Op is what a request wants to do with a shard.
type Op int

const (
	// OpWrite is a write: allowed on shards the node owns in any state
	// (INITIALIZING and LEAVING owners receive writes too).
	OpWrite Op = iota + 1
	// OpRead is a read: a node may allow it on LEAVING shards still listed
	// and refuse it on INITIALIZING ones not yet bootstrapped.
	OpRead
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	}
	return "unknown"
}

// Ownership decides which shards this node serves, from its cached
// placement. It must be safe for concurrent use and cheap: the server calls
// it once per distinct shard of every request.
type Ownership interface {
	// CheckShard returns nil if this node may serve op for shard, else an
	// error whose message is the reason alone, such as "not owned by node2"
	// or "INITIALIZING, not bootstrapped yet": the server reports it as
	// "shard 17: not owned by node2".
	CheckShard(shard uint32, op Op) error
}

// AllShards is the Ownership of a node that serves every shard (a single
// node without a placement).
type AllShards struct{}

// CheckShard implements Ownership.
func (AllShards) CheckShard(uint32, Op) error { return nil }
