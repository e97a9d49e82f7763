package bootstrap

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/placement"
)

// fakeRestore records the shards it was asked for and fails while fail
// is set.
type fakeRestore struct {
	mu     sync.Mutex
	shards []uint32
	calls  [][]uint32
	fail   bool
	whole  bool
}

func (f *fakeRestore) Restore(_ context.Context, shards []uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("bucket unreachable")
	}
	f.shards = append(f.shards, shards...)
	f.calls = append(f.calls, slices.Clone(shards))
	return nil
}

func (f *fakeRestore) WholeBatch() bool { return f.whole }

// TestRestoreSourceLoadsShardsWithNoOwnerToStreamFrom: in a fresh
// placement (no AVAILABLE or LEAVING owner anywhere) the configured
// restore source loads every shard before it is marked available; a
// failing source leaves the shards pending for the next round. A shard
// with a peer streams from the peer, never from the backup.
func TestRestoreSourceLoadsShardsWithNoOwnerToStreamFrom(t *testing.T) {
	fresh := mkPlacement([]uint32{0, 1, 2, 3})
	h := newHarness(t, fresh, nil)
	r := &fakeRestore{fail: true}
	h.b.opts.Restore = r
	require.Error(t, h.reconcile())
	require.Equal(t, Pending, h.b.State(0))
	st, _ := h.store.state(self, 0)
	require.Equal(t, placement.Initializing, st, "not available before the restore succeeded")

	r.fail = false
	require.NoError(t, h.reconcile())
	h.requireMarked(0, 1, 2, 3)
	slices.Sort(r.shards)
	require.Equal(t, []uint32{0, 1, 2, 3}, r.shards)

	// With a peer to stream from, the backup is not asked.
	p, _ := fullPeer(t)
	h2 := newHarness(t, mkPlacement([]uint32{0, 1}, "peer"), map[string]*fakePeer{"ep-peer": p})
	r2 := &fakeRestore{}
	h2.b.opts.Restore = r2
	require.NoError(t, h2.reconcile())
	h2.requireMarked(0, 1)
	require.Empty(t, r2.shards)
}

// TestWholeRestoreGetsEveryShardInOneCall: a restore source that reads
// parts shared by every shard (a backup of another shard count) is given
// all the node's shards at once, not in batches of ShardsPerFetch; one
// that does not ask keeps the batches.
func TestWholeRestoreGetsEveryShardInOneCall(t *testing.T) {
	for _, whole := range []bool{true, false} {
		h := newHarness(t, mkPlacement([]uint32{0, 1, 2, 3, 4}), nil)
		h.b.opts.ShardsPerFetch = 2
		r := &fakeRestore{whole: whole}
		h.b.opts.Restore = r
		require.NoError(t, h.reconcile())
		h.requireMarked(0, 1, 2, 3, 4)
		if whole {
			require.Equal(t, [][]uint32{{0, 1, 2, 3, 4}}, r.calls)
		} else {
			require.Len(t, r.calls, 3, "batches of 2: %v", r.calls)
		}
	}
}
