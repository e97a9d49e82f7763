package placement

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestPropertyRandomOperations drives random sequences of init, add,
// remove, replace and mark-available over random clusters (1..60
// instances, 1..6 isolation groups, RF 1..3, weights 1..3) and checks after
// every step: the placement validates, every state change is whitelisted,
// the active instances are balanced by weight, operations are
// deterministic, and a single add, remove or replace on a settled placement
// moves within RF copies of the optimum. Structural operations sometimes run
// while shards are still moving (what --force allows).
//
// The optimum is exact: the fewest new copies any assignment with the same
// per-instance counts needs (a min-cost flow, optimum_test.go), computed on
// placements of up to 1024 shards x instances. The newcomer's share
// numShards*RF*w/totalW is not a usable yardstick: when the isolation-group
// rule blocks direct moves, even the optimum exceeds it (a newcomer whose
// group already owns most shards can only take the rest through chains).
func TestPropertyRandomOperations(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newMachine(t, sizes{instances: 60, groups: 6, minShards: 64, maxShards: 512})
		t.Repeat(m.actions())
	})
}

// TestPropertySmallMovesNearOptimum runs the same machine on placements
// small enough that every settled add, remove and replace is compared with
// the exact optimum (a min-cost flow).
func TestPropertySmallMovesNearOptimum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newMachine(t, sizes{instances: 16, groups: 4, minShards: 8, maxShards: 64})
		t.Repeat(m.actions())
	})
}

type sizes struct {
	instances, groups    int
	minShards, maxShards int
}

func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"add":      m.add,
		"remove":   m.remove,
		"replace":  m.replace,
		"undo":     m.undo,
		"markSome": m.markSome,
		"markAll":  m.markAll,
		"": func(t *rapid.T) {
			require.NoError(t, m.p.Validate())
		},
	}
}

type machine struct {
	p      Placement
	nextID int
	groups []string
}

var groupNames = []string{"g0", "g1", "g2", "g3", "g4", "g5"}

func newMachine(t *rapid.T, sz sizes) *machine {
	m := &machine{groups: groupNames[:sz.groups]}
	n := rapid.IntRange(1, sz.instances).Draw(t, "instances")
	groups := rapid.IntRange(1, sz.groups).Draw(t, "groups")
	rf := rapid.IntRange(1, 3).Draw(t, "rf")
	numShards := uint32(rapid.IntRange(sz.minShards, sz.maxShards).Draw(t, "numShards"))
	ins := make([]Instance, n)
	distinct := map[string]bool{}
	for i := range ins {
		ins[i] = m.newInstance(t, m.groups[:groups])
		distinct[ins[i].IsolationGroup] = true
	}
	p, err := Init(ins, numShards, rf)
	if len(distinct) < rf {
		require.ErrorIs(t, err, ErrNotEnoughGroups)
		rf = len(distinct)
		p, err = Init(ins, numShards, rf)
	}
	require.NoError(t, err)
	requireBalanced(t, p, ins)
	again, err := Init(slices.Clone(ins), numShards, rf)
	require.NoError(t, err)
	requireSame(t, p, again, "init is deterministic")
	m.p = p
	return m
}

func (m *machine) newInstance(t *rapid.T, groups []string) Instance {
	m.nextID++
	return inst(fmt.Sprintf("n%03d", m.nextID),
		rapid.SampledFrom(groups).Draw(t, "group"),
		uint32(rapid.IntRange(1, 3).Draw(t, "weight")))
}

// maybeSettle marks everything available unless the step runs forced.
func (m *machine) maybeSettle(t *rapid.T) (settled bool) {
	if MovingShards(m.p) == 0 {
		return true
	}
	if rapid.Bool().Draw(t, "force") {
		return false
	}
	m.p = MarkAllAvailable(m.p)
	return true
}

func (m *machine) active() []Instance {
	return activeAfter(m.p, nil, nil)
}

// apply checks the outcome of a structural operation and adopts it.
func (m *machine) apply(t *rapid.T, settled bool, next Placement, err error, removed []string, added []Instance, again func() (Placement, error)) bool {
	activeNow := activeAfter(m.p, removed, added)
	groups := map[string]bool{}
	for _, in := range activeNow {
		groups[in.IsolationGroup] = true
	}
	if len(groups) < m.p.ReplicaFactor {
		require.ErrorIs(t, err, ErrNotEnoughGroups)
		return false
	}
	if err != nil && !settled && errors.Is(err, ErrNoAssignment) {
		t.Logf("forced operation refused: %v", err)
		return false
	}
	require.NoError(t, err)
	require.NoError(t, next.Validate())
	require.NoError(t, CheckTransitions(m.p, next))
	requireBalanced(t, next, activeNow)
	for _, id := range removed {
		if in, ok := next.Instance(id); ok {
			require.True(t, in.IsLeaving(), "removed %q still owns shards", id)
		}
	}
	a2, err2 := again()
	require.NoError(t, err2)
	requireSame(t, next, a2, "same input, same output")
	m.p = next
	return true
}

func (m *machine) add(t *rapid.T) {
	settled := m.maybeSettle(t)
	k := rapid.IntRange(1, 3).Draw(t, "newcomers")
	var newcomers []Instance
	for range k {
		newcomers = append(newcomers, m.newInstance(t, m.groups))
	}
	prev := m.p
	next, err := Add(prev, newcomers...)
	again := func() (Placement, error) {
		rev := slices.Clone(newcomers)
		slices.Reverse(rev)
		return Add(prev, rev...)
	}
	if !m.apply(t, settled, next, err, nil, newcomers, again) || !settled || k != 1 {
		return
	}
	// The yardstick: a newcomer's share, numShards*RF*w/totalW
	// (capped per isolation group), within one copy per replica.
	requireNearOptimum(t, prev, next)
}

// requireNearOptimum checks that a settled single add, remove or replace
// made at most RF more copies move than the exact optimum, on placements
// small enough to compute it.
func requireNearOptimum(t *rapid.T, prev, next Placement) {
	if int(prev.NumShards)*len(next.Instances) > 1024 {
		return
	}
	moved, opt := newCopies(prev, next), minMoves(prev, next)
	require.GreaterOrEqual(t, opt, 0, "reference found no assignment")
	require.LessOrEqual(t, moved, opt+prev.ReplicaFactor, "moved %d copies, optimum %d\nbefore:\n%s\nafter:\n%s", moved, opt, summary(prev), summary(next))
}

func (m *machine) remove(t *rapid.T) {
	settled := m.maybeSettle(t)
	active := m.active()
	if len(active) == 0 {
		t.Skip("no active instance")
	}
	k := rapid.IntRange(1, min(2, len(active))).Draw(t, "removed")
	var all []string
	for _, in := range active {
		all = append(all, in.ID)
	}
	ids := rapid.Permutation(all).Draw(t, "perm")[:k]
	prev := m.p
	next, err := Remove(prev, ids...)
	if !m.apply(t, settled, next, err, ids, nil, func() (Placement, error) { return Remove(prev, ids...) }) || !settled {
		return
	}
	if k == 1 {
		requireNearOptimum(t, prev, next)
	}
}

func (m *machine) replace(t *rapid.T) {
	settled := m.maybeSettle(t)
	active := m.active()
	if len(active) == 0 {
		t.Skip("no active instance")
	}
	var ids []string
	for _, in := range active {
		ids = append(ids, in.ID)
	}
	leaving, _ := m.p.Instance(rapid.SampledFrom(ids).Draw(t, "leaving"))
	like := rapid.Bool().Draw(t, "likeForLike")
	var newcomers []Instance
	if like {
		n := m.newInstance(t, m.groups)
		n.IsolationGroup, n.Weight = leaving.IsolationGroup, leaving.Weight
		newcomers = append(newcomers, n)
	} else {
		for range rapid.IntRange(1, 2).Draw(t, "newcomers") {
			newcomers = append(newcomers, m.newInstance(t, m.groups))
		}
	}
	prev := m.p
	next, err := Replace(prev, []string{leaving.ID}, newcomers)
	again := func() (Placement, error) { return Replace(prev, []string{leaving.ID}, newcomers) }
	if !m.apply(t, settled, next, err, []string{leaving.ID}, newcomers, again) || !settled {
		return
	}
	requireNearOptimum(t, prev, next)
	if !like {
		return
	}
	// Like for like: the newcomer takes exactly the leaving instance's
	// shards and nothing else moves.
	n, _ := next.Instance(newcomers[0].ID)
	var got, want []uint32
	for _, s := range n.Shards {
		got = append(got, s.ID)
		require.Equal(t, leaving.ID, s.SourceID)
	}
	for _, s := range leaving.Shards {
		want = append(want, s.ID)
	}
	require.Equal(t, want, got)
	require.Equal(t, len(want), newCopies(prev, next))
}

// undo adds one instance to a settled placement and removes it again before
// it finished bootstrapping: every shard goes back to its source.
func (m *machine) undo(t *rapid.T) {
	m.p = MarkAllAvailable(m.p)
	prev := m.p
	n := m.newInstance(t, m.groups)
	added, err := Add(prev, n)
	if !m.apply(t, true, added, err, nil, []Instance{n}, func() (Placement, error) { return Add(prev, n) }) {
		return
	}
	onlyNewcomer := true
	for _, in := range added.Instances {
		if in.ID != n.ID && in.CountByState()[Initializing] > 0 {
			onlyNewcomer = false
		}
	}
	undone, err := Remove(added, n.ID)
	require.True(t, m.apply(t, false, undone, err, []string{n.ID}, nil, func() (Placement, error) { return Remove(added, n.ID) }))
	_, still := undone.Instance(n.ID)
	require.False(t, still, "an undone instance leaves at once")
	if onlyNewcomer {
		want := prev.Clone()
		want.MaxShardSetID = undone.MaxShardSetID
		requireSame(t, want, undone, "undo restores the placement:\nadded:\n"+summary(added))
		require.Zero(t, newCopies(added, undone))
	}
}

func (m *machine) markSome(t *rapid.T) {
	var candidates []string
	for _, in := range m.p.Instances {
		if in.CountByState()[Initializing] > 0 {
			candidates = append(candidates, in.ID)
		}
	}
	if len(candidates) == 0 {
		t.Skip("nothing initializing")
	}
	in, _ := m.p.Instance(rapid.SampledFrom(candidates).Draw(t, "instance"))
	var initializing []uint32
	for _, s := range in.Shards {
		if s.State == Initializing {
			initializing = append(initializing, s.ID)
		}
	}
	var shards []uint32
	if !rapid.Bool().Draw(t, "all") {
		shards = rapid.SliceOfNDistinct(rapid.SampledFrom(initializing), 1, len(initializing), rapid.ID[uint32]).Draw(t, "shards")
	}
	next, err := MarkAvailable(m.p, in.ID, shards...)
	require.NoError(t, err)
	require.NoError(t, next.Validate())
	require.NoError(t, CheckTransitions(m.p, next))
	for _, old := range m.p.Instances {
		if cur, ok := next.Instance(old.ID); ok {
			if cur.Leaving {
				require.NotEmpty(t, cur.Shards, "drained instance %q stays", old.ID)
			}
			require.Equal(t, owned(old), owned(cur), "marking available does not change ownership")
		}
	}
	again, err := MarkAvailable(next, in.ID, shards...)
	require.NoError(t, err)
	requireSame(t, next, again, "marking available twice is harmless")
	m.p = next
}

func (m *machine) markAll(t *rapid.T) {
	next := MarkAllAvailable(m.p)
	require.NoError(t, next.Validate())
	require.NoError(t, CheckTransitions(m.p, next))
	require.Zero(t, MovingShards(next))
	for _, in := range next.Instances {
		require.False(t, in.IsLeaving())
	}
	m.p = next
}
