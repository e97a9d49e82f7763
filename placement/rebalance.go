package placement

import (
	"cmp"
	"fmt"
	"slices"
)

// rebalance gives every homeless copy an owner and brings every active
// instance to its target, moving as few copies as it can:
//
//  1. each homeless copy goes back to its source when that undoes a move,
//     else to the eligible instance in the isolation group furthest below
//     its group target (then the instance furthest below its own target);
//  2. each instance above target gives single copies straight to an
//     instance below target, preferring copies whose move undoes an
//     earlier move, then copies still INITIALIZING, then lower shard IDs;
//  3. whatever is left (the isolation-group rule blocked every direct
//     move) is resolved by a breadth-first search for the shortest chain
//     of moves that ends at an instance below target.
//
// Every step is deterministic: ties are broken by group and instance order.
func (w *work) rebalance() error {
	slices.SortFunc(w.homeless, func(a, b homeless) int {
		if c := cmp.Compare(a.shard, b.shard); c != 0 {
			return c
		}
		return cmp.Compare(a.src, b.src)
	})
	var stuck []homeless
	for _, h := range w.homeless {
		if j := w.pickReceiver(h); j >= 0 {
			w.take(j, h)
		} else {
			stuck = append(stuck, h)
		}
	}
	w.homeless = nil

	for _, i := range w.overTarget() {
		for w.count[i] > w.target[i] && w.shedDirect(i) {
		}
	}

	for _, h := range stuck {
		if !w.augment(-1, h) {
			return fmt.Errorf("%w: shard %d has no eligible owner outside the isolation groups that already hold it", ErrNoAssignment, h.shard)
		}
	}
	for _, i := range w.overTarget() {
		for w.count[i] > w.target[i] {
			if !w.augment(i, homeless{}) {
				return fmt.Errorf("%w: instance %q cannot give up a shard without breaking the isolation-group rule", ErrNoAssignment, w.ins[i].ID)
			}
		}
	}
	for i := range w.ins {
		if w.count[i] != w.target[i] {
			return fmt.Errorf("%w: instance %q ends with %d shards, want %d", ErrNoAssignment, w.ins[i].ID, w.count[i], w.target[i])
		}
	}
	return nil
}

// overTarget lists instances above target, most excess first.
func (w *work) overTarget() []int {
	var out []int
	for i := range w.ins {
		if w.count[i] > w.target[i] {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(w.deficit(a), w.deficit(b)) })
	return out
}

// pickReceiver chooses the owner of a homeless copy among instances below
// target, or returns -1.
func (w *work) pickReceiver(h homeless) int {
	if h.src >= 0 && w.deficit(h.src) > 0 && w.canTake(h.src, h, -1) {
		return h.src
	}
	best := -1
	for j := range w.ins {
		if w.deficit(j) <= 0 || !w.canTake(j, h, -1) {
			continue
		}
		if best < 0 || w.betterReceiver(j, best) {
			best = j
		}
	}
	return best
}

// betterReceiver orders candidate receivers: larger group deficit, then
// larger own deficit, then lower index.
func (w *work) betterReceiver(a, b int) bool {
	ga, gb := w.group[a], w.group[b]
	da, db := w.gTarget[ga]-w.gCount[ga], w.gTarget[gb]-w.gCount[gb]
	if da != db {
		return da > db
	}
	if w.deficit(a) != w.deficit(b) {
		return w.deficit(a) > w.deficit(b)
	}
	return a < b
}

// shedDirect moves one copy from over-target instance i straight to an
// instance below target. It reports false when no single move is allowed.
func (w *work) shedDirect(i int) bool {
	var receivers []int
	for j := range w.ins {
		if w.deficit(j) > 0 {
			receivers = append(receivers, j)
		}
	}
	slices.SortFunc(receivers, func(a, b int) int {
		if w.betterReceiver(a, b) {
			return -1
		}
		return 1
	})
	for _, j := range receivers {
		if s, ok := w.pickShard(i, j); ok {
			w.take(j, w.drop(i, s))
			return true
		}
	}
	return false
}

// pickShard chooses which of i's copies to give to j: one whose move back
// to j undoes an earlier move, else one still INITIALIZING (no bootstrap
// is lost), else the lowest shard ID j may own.
func (w *work) pickShard(i, j int) (uint32, bool) {
	const (
		none = iota
		available
		initializing
		undo
	)
	best, bestRank := uint32(0), none
	seen := make(map[uint32]bool, len(w.held[i]))
	for _, s := range w.held[i] {
		if seen[s] {
			continue
		}
		seen[s] = true
		k := w.find(s, i)
		if k < 0 || w.copies[s][k].state == Leaving {
			continue
		}
		h := homeless{shard: s, src: w.srcIfDropped(i, s)}
		if !w.canTake(j, h, i) {
			continue
		}
		rank := available
		switch {
		case h.src == j:
			rank = undo
		case w.copies[s][k].state == Initializing:
			rank = initializing
		}
		if rank > bestRank || (rank == bestRank && s < best) {
			best, bestRank = s, rank
		}
		if rank == undo {
			break
		}
	}
	return best, bestRank != none
}

// step is one link of a chain found by augment: from drops shard, to takes
// it (from == -1: the chain starts with the homeless copy). When via >= 0
// the link is a re-sourcing instead: instance via keeps bootstrapping the
// shard but streams from `from` (whose copy turns LEAVING) instead of `to`
// (whose LEAVING copy turns AVAILABLE again); no copy moves.
type step struct {
	from, to, via int
	shard         uint32
}

// augment searches for the cheapest chain of moves that either places
// homeless copy h (start == -1) or takes one copy off over-target instance
// start, and ends at an instance below target; each instance in between
// gives up one copy for the one it receives, so only the ends change
// counts. A chain's cost is the number of copies it makes bootstrap, minus
// the copies it un-makes (re-routing a copy this very operation created
// costs nothing), plus one per move so that shorter chains win ties; all
// edge costs are then 0, 1 or 2 and a bucketed Dijkstra finds the chain. It
// applies the chain and reports whether one was found. A chain never moves
// the same shard twice, so every move's eligibility is independent of the
// others.
func (w *work) augment(start int, h homeless) bool {
	const unseen = -1
	dist := make([]int, len(w.ins))
	for i := range dist {
		dist[i] = unseen
	}
	parent := make([]step, len(w.ins))
	done := make([]bool, len(w.ins))
	var buckets [][]int

	// onPath reports whether the cheapest chain to i already moves shard s.
	onPath := func(i int, s uint32) bool {
		for k := i; k >= 0 && k != start; k = parent[k].from {
			if parent[k].shard == s {
				return true
			}
		}
		return false
	}
	relax := func(st step, d int) {
		j := st.to
		if j == start || done[j] || (dist[j] != unseen && dist[j] <= d) {
			return
		}
		dist[j], parent[j] = d, st
		for len(buckets) <= d {
			buckets = append(buckets, nil)
		}
		buckets[d] = append(buckets[d], j)
	}
	// offer relaxes every instance that could take a copy of s dropped by
	// i (or the homeless copy when i == -1) at base cost d.
	offer := func(i int, hh homeless, d int) {
		for j := range w.ins {
			if w.canTake(j, hh, i) {
				relax(step{from: i, to: j, via: -1, shard: hh.shard}, d+1+w.takeCost(j, hh))
			}
		}
	}
	expand := func(i, d int) {
		seen := make(map[uint32]bool, len(w.held[i]))
		for _, s := range w.held[i] {
			if seen[s] || !w.holdsOwned(i, s) || onPath(i, s) {
				continue
			}
			seen[s] = true
			offer(i, homeless{shard: s, src: w.srcIfDropped(i, s)}, d-w.refund(i, s))
			for _, c := range w.copies[s] {
				if x := c.src; c.state == Initializing && x >= 0 && w.canResource(i, x, c.inst, s) {
					relax(step{from: i, to: x, via: c.inst, shard: s}, d+1)
				}
			}
		}
	}

	if start < 0 {
		offer(-1, h, 1)
	} else {
		expand(start, 1)
	}
	end := -1
	for d := 0; d < len(buckets) && end < 0; d++ {
		for k := 0; k < len(buckets[d]); k++ {
			j := buckets[d][k]
			if done[j] || dist[j] != d {
				continue
			}
			done[j] = true
			if w.deficit(j) > 0 {
				end = j
				break
			}
			expand(j, d)
		}
	}
	if end < 0 {
		return false
	}
	var chain []step
	for j := end; ; {
		st := parent[j]
		chain = append(chain, st)
		if st.from == start {
			break
		}
		j = st.from
	}
	// chain runs from the end back to the start; apply it forwards.
	for k := len(chain) - 1; k >= 0; k-- {
		st := chain[k]
		if st.via >= 0 {
			w.resource(st.from, st.to, st.via, st.shard)
			continue
		}
		hh := h
		if st.from >= 0 {
			hh = w.drop(st.from, st.shard)
		}
		w.take(st.to, hh)
	}
	return true
}

// takeCost is 1 when j taking h makes j bootstrap a copy it was not already
// bootstrapping before this operation, else 0 (an undo, or re-routing back
// to the original receiver).
func (w *work) takeCost(j int, h homeless) int {
	if h.src == j {
		return 0
	}
	if src, ok := w.origInit[pairIdx{j, h.shard}]; ok && src == h.src {
		return 0
	}
	return 1
}

// refund is 1 when i's copy of s was created by this operation, so
// dropping it takes a bootstrap back.
func (w *work) refund(i int, s uint32) int {
	c := w.copies[s][w.find(s, i)]
	if c.state != Initializing {
		return 0
	}
	if src, ok := w.origInit[pairIdx{i, s}]; ok && src == c.src {
		return 0
	}
	return 1
}


// canResource reports whether receiver k, bootstrapping s from x, may
// stream from y instead: y holds s AVAILABLE, x's LEAVING copy can own the
// shard again without sharing a group with another owner but y, and x is
// active.
func (w *work) canResource(y, x, k int, s uint32) bool {
	if x == y || k == y || !w.active[x] {
		return false
	}
	if c := w.copies[s][w.find(s, y)]; c.state != Available {
		return false
	}
	if kx := w.find(s, x); kx < 0 || w.copies[s][kx].state != Leaving {
		return false
	}
	return !w.groupOwns(s, w.group[x], y)
}

// resource makes k stream s from y instead of x: y's copy turns LEAVING,
// x's turns AVAILABLE again. Counts move from y to x; nothing bootstraps
// anew.
func (w *work) resource(y, x, k int, s uint32) {
	cy := &w.copies[s][w.find(s, y)]
	cy.state = Leaving
	cx := &w.copies[s][w.find(s, x)]
	cx.state, cx.cutoff = Available, 0
	w.copies[s][w.find(s, k)].src = y
	w.count[y]--
	w.gCount[w.group[y]]--
	w.count[x]++
	w.gCount[w.group[x]]++
}
