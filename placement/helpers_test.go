package placement

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// inst makes a test instance; endpoints are unique per ID.
func inst(id, group string, weight uint32) Instance {
	return Instance{ID: id, IsolationGroup: group, Zone: "z", Weight: weight, Endpoint: id + ":9000"}
}

// cluster makes n instances spread round-robin over groups, weight 1.
func cluster(n, groups int) []Instance {
	out := make([]Instance, n)
	for i := range out {
		out[i] = inst(fmt.Sprintf("i%03d", i), fmt.Sprintf("g%d", i%groups), 1)
	}
	return out
}

// owned counts an instance's non-LEAVING copies.
func owned(in Instance) int {
	c := in.CountByState()
	return c[Initializing] + c[Available]
}

// newCopies counts copies that are INITIALIZING in next but were not
// INITIALIZING with the same source on the same instance in prev: the
// shards an operation made some instance bootstrap (data movement).
func newCopies(prev, next Placement) int {
	n := 0
	for _, in := range next.Instances {
		old, _ := prev.Instance(in.ID)
		for _, s := range in.Shards {
			if s.State != Initializing {
				continue
			}
			if o, ok := old.Shard(s.ID); ok && o.State == Initializing && o.SourceID == s.SourceID {
				continue
			}
			n++
		}
	}
	return n
}

// idealShares is the reference model of balance: each group's real-valued
// share of numShards*RF copies by weight, capped at numShards per group and
// water-filled. It is written independently of targets.go, in floats.
func idealShares(numShards, rf int, ins []Instance) map[string]float64 {
	gw := map[string]float64{}
	for _, in := range ins {
		gw[in.IsolationGroup] += float64(in.Weight)
	}
	share := map[string]float64{}
	capped := map[string]bool{}
	for {
		remaining := float64(numShards * rf)
		poolW := 0.0
		for g, w := range gw {
			if capped[g] {
				remaining -= float64(numShards)
			} else {
				poolW += w
			}
		}
		changed := false
		for g, w := range gw {
			if capped[g] {
				share[g] = float64(numShards)
				continue
			}
			share[g] = remaining * w / poolW
			if share[g] > float64(numShards)+1e-9 {
				capped[g], changed = true, true
			}
		}
		if !changed {
			return share
		}
	}
}

// requireBalanced checks that the active instances' non-LEAVING counts
// track weight: every group's total within one of its ideal share, every
// instance within one of its weight's share of its group's total, and with
// equal weights and no group at its cap, max - min <= 1.
func requireBalanced(t require.TestingT, p Placement, active []Instance) {
	share := idealShares(int(p.NumShards), p.ReplicaFactor, active)
	gCount, gw := map[string]int{}, map[string]float64{}
	counts := map[string]int{}
	for _, a := range active {
		in, ok := p.Instance(a.ID)
		require.True(t, ok, "active instance %q missing", a.ID)
		counts[a.ID] = owned(in)
		gCount[a.IsolationGroup] += counts[a.ID]
		gw[a.IsolationGroup] += float64(a.Weight)
	}
	for g, c := range gCount {
		require.Less(t, math.Abs(float64(c)-share[g]), 1.0+1e-9, "group %q holds %d, ideal %.2f", g, c, share[g])
	}
	equal, capped := true, false
	for _, a := range active {
		ideal := float64(gCount[a.IsolationGroup]) * float64(a.Weight) / gw[a.IsolationGroup]
		require.Less(t, math.Abs(float64(counts[a.ID])-ideal), 1.0, "instance %q holds %d, ideal %.2f", a.ID, counts[a.ID], ideal)
		equal = equal && a.Weight == active[0].Weight
		capped = capped || share[a.IsolationGroup] >= float64(p.NumShards)-1e-9
	}
	if equal && !capped {
		lo, hi := math.MaxInt, 0
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		require.LessOrEqual(t, hi-lo, 1, "equal weights: counts span %d..%d", lo, hi)
	}
}

// activeAfter lists the instances an operation balances over: those of
// prev that were not leaving and not removed, plus the newcomers.
func activeAfter(prev Placement, removed []string, added []Instance) []Instance {
	gone := map[string]bool{}
	for _, id := range removed {
		gone[id] = true
	}
	var out []Instance
	for _, in := range prev.Instances {
		if !in.IsLeaving() && !gone[in.ID] {
			out = append(out, in)
		}
	}
	return append(out, added...)
}

func mustInit(t testing.TB, ins []Instance, numShards uint32, rf int) Placement {
	t.Helper()
	p, err := Init(ins, numShards, rf)
	require.NoError(t, err)
	return p
}

// summary renders a placement compactly for failure messages: one line per
// instance, each copy as <shard><I|A|L>[<-source].
func summary(p Placement) string {
	out := fmt.Sprintf("shards=%d rf=%d maxSetID=%d\n", p.NumShards, p.ReplicaFactor, p.MaxShardSetID)
	for _, in := range p.Instances {
		out += fmt.Sprintf("  %s g=%s w=%d:", in.ID, in.IsolationGroup, in.Weight)
		if in.Leaving {
			out += " (leaving)"
		}
		for _, s := range in.Shards {
			out += fmt.Sprintf(" %d%c", s.ID, s.State.String()[0])
			if s.SourceID != "" {
				out += "<-" + s.SourceID
			}
		}
		out += "\n"
	}
	return out
}

// requireSame compares placements and prints both compactly on mismatch.
func requireSame(t require.TestingT, want, got Placement, msg string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	if !reflect.DeepEqual(normalized(want), normalized(got)) {
		require.Fail(t, msg, "want:\n%s\ngot:\n%s", summary(want), summary(got))
	}
}
