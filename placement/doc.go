// Package placement says which instance owns which of the virtual shards,
// once per replica, and in which state; it computes changes to that
// assignment and keeps it in etcd.
//
// The package has three layers:
//
//   - the model (Placement, Instance, Shard) with Validate and a versioned
//     JSON encoding (docs/format/placement.md);
//   - the algorithm: pure functions from placement to placement (Init, Add,
//     Remove, Replace, MarkAvailable). They are deterministic, aware of
//     isolation groups, weight-proportional, and move no more shards than
//     balance needs;
//   - the Store: an effectful shell over etcd that reads the placement, runs
//     the algorithm, validates the result and writes it back with a
//     compare-and-swap on the key's ModRevision, retrying a bounded number of
//     times; and Watch, which delivers every new placement.
//
// # Shard lifecycle
//
// A copy of a shard on one instance moves through these states. Every arrow
// is one entry of the transition whitelist in shardstate.go, named by the
// event that fires it:
//
//	             assigned (init, add, remove, replace)
//	+--------+ -------------------------------------> +--------------+
//	| absent |                                        | INITIALIZING |
//	+--------+ <------------------------------------- +--------------+
//	    ^       receiver removed, or shard moved on           |
//	    |       before its bootstrap finished                 | marked available
//	    |                                                     v (bootstrap done)
//	    |  receiver of the move    +---------+  given to  +-----------+
//	    +------------------------- | LEAVING | <--------- | AVAILABLE |
//	       marked available        +---------+  another   +-----------+
//	                                    |       instance        ^
//	                                    +-----------------------+
//	                                     move undone (receiver removed
//	                                     while still INITIALIZING)
//
// A move pairs two copies: the receiver holds the shard INITIALIZING with
// SourceID naming the giver, and the giver holds it LEAVING. Marking the
// receiver's copy available deletes the LEAVING copy in the same
// compare-and-swap. A removed instance is flagged Leaving, keeps serving its
// LEAVING copies, and leaves the placement when the last one is taken over;
// removing an instance whose copies are still INITIALIZING hands them back
// to their sources at once (the undo of an add).
//
// # Balance
//
// Each active instance's target is its weight's share of numShards*RF
// copies, computed per isolation group first: a group's share is capped at
// numShards (it can own each shard once) and the excess is shared among the
// other groups. Targets round the real share up or down, never further, and
// rounding favours the instances that already hold more, so it never forces
// a move by itself. An operation moves only what the targets require: the
// newcomer's share on add, the removed instance's copies on remove; when the
// isolation-group rule blocks a direct move, the cheapest chain of moves is
// found by a small shortest-path search (see rebalance.go).
package placement
