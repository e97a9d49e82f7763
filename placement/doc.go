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
// compare-and-swap; a removed instance left with no shards leaves the
// placement.
package placement
