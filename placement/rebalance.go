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
//     move) is resolved by augment: a search for the cheapest chain of
//     moves, or of re-sourcings of copies this operation already moved,
//     that ends at an instance below target. It also repairs the greedy
//     choices of steps 1 and 2 when they used up a receiver that a more
//     constrained copy needed.
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
		sh := newPicker(i)
		for w.count[i] > w.target[i] {
			if !w.shedDirect(i, sh) {
				break
			}
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
// sh is i's shedder: rebalance sheds i one copy at a time, up to its whole
// excess (2048 copies when a fourth node joins three), and choosing each
// copy afresh scanned all of i's copies: quadratic, a quarter of a second
// of CPU for the three-node example's join.
func (w *work) shedDirect(i int, sh picker) bool {
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
		if s, ok := sh.pick(w, j); ok {
			w.take(j, w.drop(i, s))
			return true
		}
	}
	return false
}

// Ranks of a copy that an over-target instance may give a receiver; the
// higher wins (see shedRank).
const (
	rankNone = iota
	rankAvailable
	rankInitializing
	rankUndo
)

// shedRank says whether i may give its copy of s to j, and how much that
// move is worth: one that undoes an earlier move (the copy goes back to
// the instance it streams from) above one still INITIALIZING (it serves
// no reads yet, and one this operation created moves for free) above an
// AVAILABLE one. rankNone: i holds no non-LEAVING copy of s, or j may not
// take it.
func (w *work) shedRank(i, j int, s uint32) int {
	k := w.find(s, i)
	if k < 0 || w.copies[s][k].state == Leaving {
		return rankNone
	}
	h := homeless{shard: s, src: w.srcIfDropped(i, s)}
	if !w.canTake(j, h, i) {
		return rankNone
	}
	switch {
	case h.src == j:
		return rankUndo
	case w.copies[s][k].state == Initializing:
		return rankInitializing
	}
	return rankAvailable
}

// picker chooses which copy over-target instance i gives receiver j
// (shedDirect asks one per instance it sheds).
type picker interface {
	pick(w *work, j int) (uint32, bool)
}

// newPicker makes the picker for instance i: a shedder. Tests swap in one
// that checks the shedder against a scan of every copy.
var newPicker = func(i int) picker { return newShedder(i) }

// shedder chooses which of one over-target instance's copies to give each
// receiver: the first undo in the order i holds its shards, else the
// lowest INITIALIZING shard, else the lowest shard j may own.
//
// It ranks i's copies once per receiver and then walks that list. This is
// exact because, while i sheds, the only copies that change are the ones
// i gives away (i only drops, the receivers only take): a shard's rank
// for j depends on nothing but that shard's copies, so every listed entry
// keeps its rank until i gives it away, after which i holds no
// non-LEAVING copy of it and never will again in this pass. pick
// re-checks each entry's rank anyway and starts the list over if it
// changed.
type shedder struct {
	i     int
	lists map[int]*shedList // by receiver
}

type shedList struct {
	shards []uint32
	ranks  []int
	pos    int
}

func newShedder(i int) *shedder { return &shedder{i: i, lists: map[int]*shedList{}} }

// pick returns the copy i should give j, if any.
func (sh *shedder) pick(w *work, j int) (uint32, bool) {
	l := sh.lists[j]
	if l == nil {
		l = sh.rank(w, j)
		sh.lists[j] = l
	}
	for ; l.pos < len(l.shards); l.pos++ {
		s := l.shards[l.pos]
		switch r := w.shedRank(sh.i, j, s); {
		case r == l.ranks[l.pos]:
			return s, true
		case r != rankNone:
			// Not the rank it was listed with: cannot happen (see
			// shedder), but never give away the wrong copy.
			delete(sh.lists, j)
			return sh.pick(w, j)
		}
	}
	return 0, false
}

// rank lists the copies i may give j, best first.
func (sh *shedder) rank(w *work, j int) *shedList {
	held := w.held[sh.i]
	seen := make(map[uint32]bool, len(held))
	var undo, init, avail []uint32
	for _, s := range held {
		if seen[s] {
			continue
		}
		seen[s] = true
		switch w.shedRank(sh.i, j, s) {
		case rankUndo:
			undo = append(undo, s) // held order: the first one wins
		case rankInitializing:
			init = append(init, s)
		case rankAvailable:
			avail = append(avail, s)
		}
	}
	slices.Sort(init)
	slices.Sort(avail)
	l := &shedList{shards: make([]uint32, 0, len(undo)+len(init)+len(avail))}
	for _, part := range []struct {
		shards []uint32
		rank   int
	}{{undo, rankUndo}, {init, rankInitializing}, {avail, rankAvailable}} {
		l.shards = append(l.shards, part.shards...)
		for range part.shards {
			l.ranks = append(l.ranks, part.rank)
		}
	}
	return l
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
// costs nothing), plus one per link so that shorter chains win; all link
// costs are then 0, 1 or 2 and a bucketed Dijkstra finds the chain, taking
// the one with fewer new copies among chains of equal cost. It
// applies the chain and reports whether one was found. A chain never moves
// the same shard twice, so every move's eligibility is independent of the
// others.
func (w *work) augment(start int, h homeless) bool {
	chain, ok := w.findChain(start, h, true)
	if ok && !chainValid(chain) {
		// Re-expanding an instance changed the chain to nodes found
		// through it; search again without that refinement.
		chain, ok = w.findChain(start, h, false)
	}
	if !ok {
		return false
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

// chainValid reports whether a chain moves each shard and visits each
// instance at most once.
func chainValid(chain []step) bool {
	shards := make(map[uint32]bool, len(chain))
	ins := make(map[int]bool, len(chain))
	for _, st := range chain {
		if shards[st.shard] || ins[st.to] {
			return false
		}
		shards[st.shard], ins[st.to] = true, true
	}
	return true
}

// findChain is the search behind augment; the chain comes back from its end
// to its start. reopen lets an instance be expanded again when it is
// reached at the same cost with fewer new copies.
func (w *work) findChain(start int, h homeless, reopen bool) ([]step, bool) {
	const unseen = -1
	dist := make([]int, len(w.ins)) // hops + net new copies
	net := make([]int, len(w.ins))  // net new copies, breaks ties of dist
	for i := range dist {
		dist[i] = unseen
	}
	parent := make([]step, len(w.ins))
	done := make([]bool, len(w.ins))
	var buckets [][]int

	// onPath reports whether the cheapest chain to i already moves shard s
	// (s >= 0) or passes through instance via (via >= 0).
	onPath := func(i int, s int64, via int) bool {
		for k, n := i, 0; k >= 0 && k != start && n <= len(w.ins); k, n = parent[k].from, n+1 {
			if int64(parent[k].shard) == s || k == via {
				return true
			}
		}
		return false
	}
	relax := func(st step, d, n int) {
		j := st.to
		if j == start || (dist[j] != unseen && (dist[j] < d || (dist[j] == d && net[j] <= n))) {
			return
		}
		if done[j] {
			// Reached again at the same cost with fewer new copies (a
			// re-routed copy was taken back): expand it again, unless
			// that would make the chain loop through j.
			if !reopen || dist[j] != d || onPath(st.from, -1, j) {
				return
			}
			done[j] = false
		}
		dist[j], net[j], parent[j] = d, n, st
		for len(buckets) <= d {
			buckets = append(buckets, nil)
		}
		buckets[d] = append(buckets[d], j)
	}
	// offer relaxes every instance that could take a copy of s dropped by
	// i (or the homeless copy when i == -1) from cost d, n.
	offer := func(i int, hh homeless, d, n int) {
		for j := range w.ins {
			if w.canTake(j, hh, i) {
				c := w.takeCost(j, hh)
				relax(step{from: i, to: j, via: -1, shard: hh.shard}, d+1+c, n+c)
			}
		}
	}
	expand := func(i, d, n int) {
		seen := make(map[uint32]bool, len(w.held[i]))
		for _, s := range w.held[i] {
			if seen[s] || !w.holdsOwned(i, s) || onPath(i, int64(s), -1) {
				continue
			}
			seen[s] = true
			r := w.refund(i, s)
			offer(i, homeless{shard: s, src: w.srcIfDropped(i, s)}, d-r, n-r)
			for _, c := range w.copies[s] {
				if x := c.src; c.state == Initializing && x >= 0 && w.canResource(i, x, c.inst, s) {
					relax(step{from: i, to: x, via: c.inst, shard: s}, d+1, n)
				}
			}
		}
	}

	if start < 0 {
		offer(-1, h, 0, 0)
	} else {
		expand(start, 0, 0)
	}
	end := -1
	for d := 0; d < len(buckets) && end < 0; d++ {
		for {
			// Within a bucket, fewer net new copies first.
			j := -1
			for _, k := range buckets[d] {
				if !done[k] && dist[k] == d && (j < 0 || net[k] < net[j]) {
					j = k
				}
			}
			if j < 0 {
				break
			}
			done[j] = true
			if w.deficit(j) > 0 {
				end = j
				break
			}
			expand(j, d, net[j])
		}
	}
	if end < 0 {
		return nil, false
	}
	var chain []step
	for j := end; len(chain) <= len(w.ins); {
		st := parent[j]
		chain = append(chain, st)
		if st.from == start {
			return chain, true
		}
		j = st.from
	}
	return nil, false // a loop: cannot happen, but never spin
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
