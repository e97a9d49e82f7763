package placement

import "errors"

var (
	// ErrInvalid wraps every invariant violation Validate reports.
	ErrInvalid = errors.New("invalid placement")
	// ErrNotEnoughGroups is returned when fewer isolation groups than the
	// replica factor remain, so no shard could have RF owners in distinct
	// groups.
	ErrNotEnoughGroups = errors.New("not enough isolation groups")
	// ErrUnknownInstance is returned when an operation names an instance the
	// placement does not have.
	ErrUnknownInstance = errors.New("unknown instance")
	// ErrDuplicateInstance is returned when an added instance's ID is
	// already in the placement.
	ErrDuplicateInstance = errors.New("instance already in placement")
	// ErrShardsMoving is returned by the store when an add, remove or
	// replace is asked for while shards are still moving and Force is off.
	ErrShardsMoving = errors.New("shards are still moving")
	// ErrCASConflict is returned by the store when every attempt of a
	// read-modify-write lost the compare-and-swap to a concurrent writer.
	ErrCASConflict = errors.New("CAS conflict")
	// ErrNotFound is returned by the store when the cluster has no
	// placement yet.
	ErrNotFound = errors.New("placement not found")
	// ErrExists is returned by the store's Init when the cluster already
	// has a placement.
	ErrExists = errors.New("placement already exists")
	// ErrNoAssignment is returned when the algorithm finds no way to give a
	// shard an owner that keeps the isolation-group rule; it can only
	// happen on a forced change while earlier moves are unfinished.
	ErrNoAssignment = errors.New("no valid assignment")
)
