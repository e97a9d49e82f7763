package placement

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
)

// KeyPrefix is where placements live in etcd: one key per cluster,
// KeyPrefix + cluster name.
const KeyPrefix = "_tessera/placement/"

// DefaultMaxRetries is how many times a read-modify-write is retried after
// losing the compare-and-swap before it gives up with ErrCASConflict.
const DefaultMaxRetries = 10

// Key returns the etcd key of the cluster's placement.
func Key(cluster string) string { return KeyPrefix + cluster }

// StoreOptions configure a Store. The zero value of each field means its
// default.
type StoreOptions struct {
	// Cluster names the placement (default "default").
	Cluster string
	// MaxRetries bounds the retries after a lost compare-and-swap (default
	// DefaultMaxRetries; negative means none).
	MaxRetries int
	// Now stamps CutoverNanos and CutoffNanos of changed copies (default
	// time.Now).
	Now func() time.Time
}

// ChangeOptions tune Add, Remove and Replace.
type ChangeOptions struct {
	// Force lets the change through while shards are still moving.
	Force bool
}

// Store keeps one cluster's placement in etcd. Every change is a
// read-modify-write: read the key, run the pure algorithm, Validate and
// CheckTransitions, then write with a Txn that compares the key's
// ModRevision with the one read, retrying from a fresh read when another
// writer got there first. A Store is safe for concurrent use; it does not
// own the client.
type Store struct {
	client     *clientv3.Client
	key        string
	maxRetries int
	now        func() time.Time
}

// NewStore returns a store for opts.Cluster on the given client.
func NewStore(client *clientv3.Client, opts StoreOptions) *Store {
	if opts.Cluster == "" {
		opts.Cluster = "default"
	}
	switch {
	case opts.MaxRetries == 0:
		opts.MaxRetries = DefaultMaxRetries
	case opts.MaxRetries < 0:
		opts.MaxRetries = 0
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{client: client, key: Key(opts.Cluster), maxRetries: opts.MaxRetries, now: opts.Now}
}

// Key returns the etcd key the store uses.
func (s *Store) Key() string { return s.key }

// Get reads the placement; its Version is the key's ModRevision. It returns
// ErrNotFound when the cluster has none yet.
func (s *Store) Get(ctx context.Context) (Placement, error) {
	p, _, err := s.read(ctx)
	return p, err
}

// read returns the placement and the store revision the read was served
// at (also when the key is missing, with ErrNotFound).
func (s *Store) read(ctx context.Context) (Placement, int64, error) {
	resp, err := s.client.Get(ctx, s.key)
	if err != nil {
		return Placement{}, 0, fmt.Errorf("read placement %s: %w", s.key, err)
	}
	if len(resp.Kvs) == 0 {
		return Placement{}, resp.Header.Revision, fmt.Errorf("%w: no key %s", ErrNotFound, s.key)
	}
	p, err := decodeStored(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	if err != nil {
		return Placement{}, resp.Header.Revision, fmt.Errorf("read placement %s: %w", s.key, err)
	}
	return p, resp.Header.Revision, nil
}

func decodeStored(value []byte, modRev int64) (Placement, error) {
	var p Placement
	// Directly, not through json.Unmarshal, which would scan the 1 MB
	// value twice before UnmarshalJSON reads it (encoding/json still
	// checks whatever the fast reader does not take).
	if err := p.UnmarshalJSON(value); err != nil {
		return Placement{}, err
	}
	p.Version = modRev
	return p, nil
}

func encodeStored(p Placement) ([]byte, error) {
	p.Version = 0          // the version is the key's ModRevision, not part of the value
	return p.MarshalJSON() // already compact: json.Marshal would scan it again
}

// Init creates the cluster's placement; it returns ErrExists when there
// already is one.
func (s *Store) Init(ctx context.Context, instances []Instance, numShards uint32, replicaFactor int) (Placement, error) {
	p, err := Init(instances, numShards, replicaFactor)
	if err != nil {
		return Placement{}, err
	}
	p = stamp(Placement{}, p, s.now())
	data, err := encodeStored(p)
	if err != nil {
		return Placement{}, fmt.Errorf("encode placement: %w", err)
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.key), "=", 0)).
		Then(clientv3.OpPut(s.key, string(data))).
		Else(clientv3.OpGet(s.key)).
		Commit()
	if err != nil {
		return Placement{}, fmt.Errorf("write placement %s: %w", s.key, err)
	}
	if !resp.Succeeded {
		var version int64
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			version = kvs[0].ModRevision
		}
		return Placement{}, fmt.Errorf("%w: %s (version %d)", ErrExists, s.key, version)
	}
	p.Version = resp.Header.Revision
	return p, nil
}

// Update runs fn on the current placement and writes its result with a
// compare-and-swap, re-running fn on the placement that won when a
// concurrent writer got there first, at most MaxRetries times (then
// ErrCASConflict). fn must be a pure function of its argument; its errors
// are returned as they are. When fn returns the placement unchanged,
// nothing is written and the current placement is returned.
func (s *Store) Update(ctx context.Context, fn func(Placement) (Placement, error)) (Placement, error) {
	return s.update(ctx, nil, fn)
}

// UpdateFrom is Update starting from guess, a placement this process
// already holds (a node's watch delivered it), instead of reading the key
// first: the compare-and-swap is against guess.Version, so a stale guess
// only costs the failed swap, whose reply carries the current placement
// to run fn on again (not counted as a retry: nobody raced). A guess
// without a version is ignored.
func (s *Store) UpdateFrom(ctx context.Context, guess Placement, fn func(Placement) (Placement, error)) (Placement, error) {
	if guess.Version <= 0 {
		return s.update(ctx, nil, fn)
	}
	return s.update(ctx, &guess, fn)
}

func (s *Store) update(ctx context.Context, guess *Placement, fn func(Placement) (Placement, error)) (Placement, error) {
	var cur Placement
	if guess != nil {
		cur = guess.Clone()
	} else {
		var err error
		if cur, _, err = s.read(ctx); err != nil {
			return Placement{}, err
		}
	}
	for attempt := 0; ; {
		next, err := fn(cur.Clone())
		if err == nil {
			next.Version = cur.Version
		}
		if guess != nil && (err != nil || reflect.DeepEqual(normalized(cur), normalized(next))) {
			// fn refused the guess or left it unchanged: the answer
			// must come from the current placement, not from a guess
			// that may be stale.
			guess = nil
			if cur, _, err = s.read(ctx); err != nil {
				return Placement{}, err
			}
			continue
		}
		if err != nil {
			return Placement{}, err
		}
		if reflect.DeepEqual(normalized(cur), normalized(next)) {
			return cur, nil
		}
		next = stamp(cur, next, s.now())
		if err := next.Validate(); err != nil {
			return Placement{}, err
		}
		if err := CheckTransitions(cur, next); err != nil {
			return Placement{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		data, err := encodeStored(next)
		if err != nil {
			return Placement{}, fmt.Errorf("encode placement: %w", err)
		}
		// A lost swap answers with the placement that won, so the retry
		// needs no read of its own.
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(s.key), "=", cur.Version)).
			Then(clientv3.OpPut(s.key, string(data))).
			Else(clientv3.OpGet(s.key)).
			Commit()
		if err != nil {
			return Placement{}, fmt.Errorf("write placement %s: %w", s.key, err)
		}
		if resp.Succeeded {
			next.Version = resp.Header.Revision
			return next, nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return Placement{}, fmt.Errorf("%w: no key %s", ErrNotFound, s.key)
		}
		if cur, err = decodeStored(kvs[0].Value, kvs[0].ModRevision); err != nil {
			return Placement{}, fmt.Errorf("read placement %s: %w", s.key, err)
		}
		if guess != nil {
			guess = nil // the guess was stale: nobody raced this write
			continue
		}
		if attempt >= s.maxRetries {
			return Placement{}, fmt.Errorf("%w: placement %s changed concurrently on every attempt, gave up after %d retries", ErrCASConflict, s.key, s.maxRetries)
		}
		if err := ctxsleep.Sleep(ctx, backoff(attempt)); err != nil {
			return Placement{}, err
		}
		attempt++
	}
}

// normalized makes empty and nil shard lists compare equal.
func normalized(p Placement) Placement {
	out := p.Clone()
	for i := range out.Instances {
		if len(out.Instances[i].Shards) == 0 {
			out.Instances[i].Shards = nil
		}
	}
	return out
}

// backoff spreads retrying writers apart: up to 2^attempt ms, capped at
// 100 ms, with full jitter.
func backoff(attempt int) time.Duration {
	ceiling := time.Duration(1<<min(attempt, 7)) * time.Millisecond
	return time.Duration(rand.Int64N(int64(min(ceiling, 100*time.Millisecond)) + 1))
}

// stamp sets CutoverNanos on copies that became INITIALIZING (or changed
// source) and CutoffNanos on copies that became LEAVING, and clears
// CutoffNanos on copies that are no longer LEAVING.
func stamp(prev, next Placement, now time.Time) Placement {
	nanos := now.UnixNano()
	for i := range next.Instances {
		in := &next.Instances[i]
		old, _ := prev.Instance(in.ID)
		for j := range in.Shards {
			sh := &in.Shards[j]
			before, had := old.Shard(sh.ID)
			switch sh.State {
			case Initializing:
				if !had || before.State != Initializing || before.SourceID != sh.SourceID {
					sh.CutoverNanos = nanos
				}
			case Leaving:
				if !had || before.State != Leaving {
					sh.CutoffNanos = nanos
				}
			case Available:
				sh.CutoffNanos = 0
			}
		}
	}
	return next
}

// Add adds instances (see Add). Unless opts.Force, it refuses while shards
// are still moving.
func (s *Store) Add(ctx context.Context, newcomers []Instance, opts ChangeOptions) (Placement, error) {
	return s.Update(ctx, func(p Placement) (Placement, error) {
		if err := refuseMoving(p, nil, opts); err != nil {
			return Placement{}, err
		}
		return Add(p, newcomers...)
	})
}

// Remove removes instances (see Remove). Unless opts.Force, it refuses
// while shards are still moving, except when every moving shard is moving
// onto a removed instance: that is the undo of an add and always allowed.
func (s *Store) Remove(ctx context.Context, ids []string, opts ChangeOptions) (Placement, error) {
	return s.Update(ctx, func(p Placement) (Placement, error) {
		if err := requireKnown(p, ids); err != nil {
			return Placement{}, fmt.Errorf("remove instances: %w", err)
		}
		if err := refuseMoving(p, ids, opts); err != nil {
			return Placement{}, err
		}
		return Remove(p, ids...)
	})
}

// Replace replaces instances (see Replace). Unless opts.Force, it refuses
// while shards are still moving.
func (s *Store) Replace(ctx context.Context, leaving []string, newcomers []Instance, opts ChangeOptions) (Placement, error) {
	return s.Update(ctx, func(p Placement) (Placement, error) {
		if err := requireKnown(p, leaving); err != nil {
			return Placement{}, fmt.Errorf("replace instances: %w", err)
		}
		if err := refuseMoving(p, nil, opts); err != nil {
			return Placement{}, err
		}
		return Replace(p, leaving, newcomers)
	})
}

// MarkAvailable marks the instance's INITIALIZING shards available (all of
// them when no shard is given) in one compare-and-swap; see MarkAvailable.
// Bootstrap calls it with the shards it finished; a repeated call is
// harmless and writes nothing.
func (s *Store) MarkAvailable(ctx context.Context, id string, shards ...uint32) (Placement, error) {
	return s.Update(ctx, func(p Placement) (Placement, error) {
		return MarkAvailable(p, id, shards...)
	})
}

// MarkAvailableFrom is MarkAvailable starting from guess (see UpdateFrom):
// a bootstrapping node's watch already holds the placement, so its
// mark-available CAS needs no read of the 1 MB key first.
func (s *Store) MarkAvailableFrom(ctx context.Context, guess Placement, id string, shards ...uint32) (Placement, error) {
	return s.UpdateFrom(ctx, guess, func(p Placement) (Placement, error) {
		return MarkAvailable(p, id, shards...)
	})
}

// requireKnown names the first ID the placement does not have, so an
// operator's typo is reported before anything else.
func requireKnown(p Placement, ids []string) error {
	for _, id := range ids {
		if _, ok := p.Instance(id); !ok {
			return fmt.Errorf("%w %q", ErrUnknownInstance, id)
		}
	}
	return nil
}

// refuseMoving returns ErrShardsMoving when some INITIALIZING copy sits on
// an instance not in except and opts.Force is off.
func refuseMoving(p Placement, except []string, opts ChangeOptions) error {
	if opts.Force {
		return nil
	}
	skip := make(map[string]bool, len(except))
	for _, id := range except {
		skip[id] = true
	}
	moving := 0
	for _, in := range p.Instances {
		if !skip[in.ID] {
			moving += in.CountByState()[Initializing]
		}
	}
	if moving > 0 {
		return fmt.Errorf("%w: %d shard(s) still INITIALIZING; mark them available first, or force", ErrShardsMoving, moving)
	}
	return nil
}

// IsUnreachable reports whether err means etcd could not be reached in
// time, as opposed to a placement-level failure.
func IsUnreachable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded)
}
