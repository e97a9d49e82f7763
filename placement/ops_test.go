package placement

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// racks builds a settled placement: perRack instances in each of n racks.
func racks(t testing.TB, n, perRack int, numShards uint32, rf int) Placement {
	t.Helper()
	var ins []Instance
	for r := range n {
		for k := range perRack {
			ins = append(ins, inst(fmt.Sprintf("r%d-i%02d", r, k), fmt.Sprintf("rack%d", r), 1))
		}
	}
	return MarkAllAvailable(mustInit(t, ins, numShards, rf))
}

type scenarioStep struct {
	name    string
	op      func(Placement) (Placement, error)
	wantErr error
	check   func(t *testing.T, prev, next Placement)
}

// TestScenarios replays placement changes on 4096 shards, one table entry
// per scenario, checking after each step the invariants, the whitelisted
// transitions and what the step was for.
func TestScenarios(t *testing.T) {
	newcomer := inst("new", "rack1", 1)
	tests := []struct {
		name  string
		start func(t *testing.T) Placement
		steps []scenarioStep
	}{
		{
			name:  "add to a full rack takes shards from rack-mates only, then settles",
			start: func(t *testing.T) Placement { return racks(t, 3, 2, 4096, 3) },
			steps: []scenarioStep{
				{
					name: "add",
					op:   func(p Placement) (Placement, error) { return Add(p, newcomer) },
					check: func(t *testing.T, prev, next Placement) {
						n, _ := next.Instance("new")
						require.InDelta(t, 4096/3, len(n.Shards), 1)
						for _, s := range n.Shards {
							require.Equal(t, Initializing, s.State)
							src, _ := next.Instance(s.SourceID)
							require.Equal(t, "rack1", src.IsolationGroup, "shard %d", s.ID)
							c, _ := src.Shard(s.ID)
							require.Equal(t, Leaving, c.State)
						}
						require.Equal(t, len(n.Shards), newCopies(prev, next))
						require.Equal(t, len(n.Shards), MovingShards(next))
					},
				},
				{
					name: "mark the newcomer available",
					op:   func(p Placement) (Placement, error) { return MarkAvailable(p, "new") },
					check: func(t *testing.T, prev, next Placement) {
						require.Zero(t, MovingShards(next))
						for _, in := range next.Instances {
							require.Zero(t, in.CountByState()[Leaving], in.ID)
						}
						requireBalanced(t, next, next.Instances)
					},
				},
			},
		},
		{
			name:  "removing an instance still initializing gives every shard back",
			start: func(t *testing.T) Placement { return racks(t, 3, 3, 4096, 3) },
			steps: []scenarioStep{
				{name: "add", op: func(p Placement) (Placement, error) { return Add(p, newcomer) }},
				{
					name: "undo",
					op:   func(p Placement) (Placement, error) { return Remove(p, "new") },
					check: func(t *testing.T, prev, next Placement) {
						_, ok := next.Instance("new")
						require.False(t, ok, "the undone instance leaves at once")
						require.Zero(t, MovingShards(next))
						want := racks(t, 3, 3, 4096, 3)
						want.MaxShardSetID = next.MaxShardSetID
						requireSame(t, want, next, "undo restores the placement")
					},
				},
			},
		},
		{
			name:  "removing an available instance drains it through LEAVING",
			start: func(t *testing.T) Placement { return racks(t, 3, 3, 4096, 3) },
			steps: []scenarioStep{
				{
					name: "remove",
					op:   func(p Placement) (Placement, error) { return Remove(p, "r1-i00") },
					check: func(t *testing.T, prev, next Placement) {
						gone, ok := next.Instance("r1-i00")
						require.True(t, ok, "stays until its shards are taken over")
						require.True(t, gone.Leaving)
						old, _ := prev.Instance("r1-i00")
						require.Equal(t, len(old.Shards), gone.CountByState()[Leaving])
						require.Equal(t, len(old.Shards), newCopies(prev, next))
						for _, in := range next.Instances {
							for _, s := range in.Shards {
								if s.State == Initializing {
									require.Equal(t, "r1-i00", s.SourceID)
									require.Equal(t, "rack1", in.IsolationGroup)
								}
							}
						}
					},
				},
				{
					name: "receivers finish",
					op: func(p Placement) (Placement, error) {
						var err error
						for _, id := range []string{"r1-i01", "r1-i02"} {
							if p, err = MarkAvailable(p, id); err != nil {
								return p, err
							}
						}
						return p, nil
					},
					check: func(t *testing.T, prev, next Placement) {
						_, ok := next.Instance("r1-i00")
						require.False(t, ok, "drained instance left")
						require.Len(t, next.Instances, 8)
						requireBalanced(t, next, next.Instances)
					},
				},
			},
		},
		{
			name:  "like-for-like replace moves exactly the leaving instance's shards",
			start: func(t *testing.T) Placement { return racks(t, 4, 3, 4096, 3) },
			steps: []scenarioStep{{
				name: "replace",
				op: func(p Placement) (Placement, error) {
					return Replace(p, []string{"r2-i01"}, []Instance{inst("fresh", "rack2", 1)})
				},
				check: func(t *testing.T, prev, next Placement) {
					old, _ := prev.Instance("r2-i01")
					n, _ := next.Instance("fresh")
					require.Len(t, n.Shards, len(old.Shards))
					for k, s := range n.Shards {
						require.Equal(t, old.Shards[k].ID, s.ID)
						require.Equal(t, "r2-i01", s.SourceID)
					}
					require.Equal(t, len(old.Shards), newCopies(prev, next))
				},
			}},
		},
		{
			name: "weights set the share",
			start: func(t *testing.T) Placement {
				return MarkAllAvailable(mustInit(t, []Instance{inst("a", "r", 1), inst("b", "r", 2), inst("c", "r", 3)}, 4096, 1))
			},
			steps: []scenarioStep{{
				name: "add a heavy instance",
				op:   func(p Placement) (Placement, error) { return Add(p, inst("d", "r", 4)) },
				check: func(t *testing.T, prev, next Placement) {
					for _, in := range next.Instances {
						require.InDelta(t, 4096*float64(in.Weight)/10, owned(in), 1, in.ID)
					}
					d, _ := next.Instance("d")
					require.Equal(t, len(d.Shards), newCopies(prev, next))
				},
			}},
		},
		{
			name:  "errors leave nothing half done",
			start: func(t *testing.T) Placement { return racks(t, 3, 1, 4096, 3) },
			steps: []scenarioStep{
				{name: "unknown instance", op: func(p Placement) (Placement, error) { return Remove(p, "nope") }, wantErr: ErrUnknownInstance},
				{name: "duplicate", op: func(p Placement) (Placement, error) { return Add(p, inst("r0-i00", "rack0", 1)) }, wantErr: ErrDuplicateInstance},
				{name: "too few groups left", op: func(p Placement) (Placement, error) { return Remove(p, "r0-i00") }, wantErr: ErrNotEnoughGroups},
				{name: "mark unknown", op: func(p Placement) (Placement, error) { return MarkAvailable(p, "nope") }, wantErr: ErrUnknownInstance},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.start(t)
			require.NoError(t, p.Validate())
			for _, st := range tt.steps {
				next, err := st.op(p)
				if st.wantErr != nil {
					require.ErrorIs(t, err, st.wantErr, st.name)
					continue
				}
				require.NoError(t, err, st.name)
				require.NoError(t, next.Validate(), st.name)
				require.NoError(t, CheckTransitions(p, next), st.name)
				if st.check != nil {
					st.check(t, p, next)
				}
				p = next
			}
		})
	}
}

func TestInitRefusesFewerGroupsThanReplicas(t *testing.T) {
	_, err := Init(cluster(6, 2), 4096, 3)
	require.ErrorIs(t, err, ErrNotEnoughGroups)
	require.ErrorContains(t, err, "2 isolation group(s) for replica factor 3")
}

func TestInitSpreadsReplicasOverGroups(t *testing.T) {
	p := mustInit(t, cluster(9, 3), 4096, 3)
	require.NoError(t, p.Validate())
	for _, in := range p.Instances {
		require.InDelta(t, 4096*3/9, len(in.Shards), 1)
		for _, s := range in.Shards {
			require.Equal(t, Initializing, s.State)
			require.Empty(t, s.SourceID)
		}
	}
	require.Equal(t, uint32(9), p.MaxShardSetID)
}

func TestMarkAvailable(t *testing.T) {
	base := racks(t, 2, 2, 64, 2)
	added, err := Add(base, inst("new", "rack0", 1))
	require.NoError(t, err)
	n, _ := added.Instance("new")
	first, second := n.Shards[0], n.Shards[1]

	one, err := MarkAvailable(added, "new", first.ID)
	require.NoError(t, err)
	got, _ := one.Instance("new")
	c, _ := got.Shard(first.ID)
	require.Equal(t, Available, c.State)
	require.Empty(t, c.SourceID)
	src, _ := one.Instance(first.SourceID)
	_, still := src.Shard(first.ID)
	require.False(t, still, "LEAVING copy deleted")
	c, _ = got.Shard(second.ID)
	require.Equal(t, Initializing, c.State, "other shards untouched")

	again, err := MarkAvailable(one, "new", first.ID)
	require.NoError(t, err)
	requireSame(t, one, again, "marking an AVAILABLE shard again changes nothing")

	_, err = MarkAvailable(added, "new", 9999)
	require.ErrorContains(t, err, "does not hold shard 9999")
	_, err = MarkAvailable(added, first.SourceID, first.ID)
	require.ErrorContains(t, err, "is LEAVING")

	all, err := MarkAvailable(added, "new")
	require.NoError(t, err)
	require.Zero(t, MovingShards(all))
}

func TestOperationsDoNotModifyInput(t *testing.T) {
	p := racks(t, 3, 2, 256, 2)
	before := p.Clone()
	_, err := Add(p, inst("x", "rack0", 1))
	require.NoError(t, err)
	_, err = Remove(p, "r0-i00")
	require.NoError(t, err)
	_, err = Replace(p, []string{"r0-i00"}, []Instance{inst("y", "rack0", 1)})
	require.NoError(t, err)
	requireSame(t, before, p, "input unchanged")
}
