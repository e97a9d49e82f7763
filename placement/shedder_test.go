package placement

import (
	"testing"

	"pgregory.net/rapid"
)

// scanPicker is how rebalance chose the copy to shed before the shedder:
// every copy of i scanned afresh for each receiver. It is the reference
// the shedder must agree with.
type scanPicker struct{ i int }

func (sp scanPicker) pick(w *work, j int) (uint32, bool) {
	best, bestRank := uint32(0), rankNone
	seen := make(map[uint32]bool, len(w.held[sp.i]))
	for _, s := range w.held[sp.i] {
		if seen[s] {
			continue
		}
		seen[s] = true
		rank := w.shedRank(sp.i, j, s)
		if rank == rankNone {
			continue
		}
		if rank > bestRank || (rank == bestRank && s < best) {
			best, bestRank = s, rank
		}
		if rank == rankUndo {
			break
		}
	}
	return best, bestRank != rankNone
}

// checkingPicker asks both and fails the test when they disagree.
type checkingPicker struct {
	t     *rapid.T
	fast  picker
	ref   scanPicker
	picks *int
}

func (c checkingPicker) pick(w *work, j int) (uint32, bool) {
	want, wantOK := c.ref.pick(w, j)
	got, gotOK := c.fast.pick(w, j)
	if got != want || gotOK != wantOK {
		c.t.Fatalf("instance %d giving %d: shedder picked shard %d (%v), a full scan picks %d (%v)", c.ref.i, j, got, gotOK, want, wantOK)
	}
	*c.picks++
	return got, gotOK
}

// TestShedderPicksWhatAScanPicks runs the random-operations machine with
// every shed choice made by both the shedder and a full scan of the
// instance's copies: the shedder is an index over the scan, so every
// placement comes out the same.
func TestShedderPicksWhatAScanPicks(t *testing.T) {
	picks := 0
	rapid.Check(t, func(rt *rapid.T) {
		newPicker = func(i int) picker {
			return checkingPicker{t: rt, fast: newShedder(i), ref: scanPicker{i}, picks: &picks}
		}
		defer func() { newPicker = func(i int) picker { return newShedder(i) } }()
		m := newMachine(rt, sizes{instances: 24, groups: 4, minShards: 16, maxShards: 256})
		rt.Repeat(m.actions())
	})
	if picks == 0 {
		t.Fatal("no shed choice was made: the test checked nothing")
	}
	t.Logf("%d shed choices compared", picks)
}

// TestShedderJoinMatchesScan is the three-node example's join, the case
// the shedder was built for, checked choice by choice.
func TestShedderJoinMatchesScan(t *testing.T) {
	p := MarkAllAvailable(mustInit(t, cluster(3, 3), 4096, 3))
	fast, err := Add(p, inst("i003", "g0", 1))
	if err != nil {
		t.Fatal(err)
	}
	newPicker = func(i int) picker { return scanPicker{i} }
	defer func() { newPicker = func(i int) picker { return newShedder(i) } }()
	slow, err := Add(p, inst("i003", "g0", 1))
	if err != nil {
		t.Fatal(err)
	}
	if summary(fast) != summary(slow) {
		t.Fatalf("shedder and scan disagree:\nshedder %s\nscan %s", summary(fast), summary(slow))
	}
	in, _ := fast.Instance("i003")
	if len(in.Shards) != 2048 {
		t.Fatalf("node4 got %d shards, want 2048", len(in.Shards))
	}
}
