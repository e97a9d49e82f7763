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

// step is one move of a chain found by augment: from drops shard, to takes
// it. from == -1 means the chain starts with the homeless copy.
type step struct {
	from, to int
	shard    uint32
}

// augment searches breadth-first for the shortest chain of moves that
// either places homeless copy h (start == -1) or takes one copy off
// over-target instance start, and ends at an instance below target; each
// intermediate instance gives up one copy for the one it receives, so only
// the ends change counts. It applies the chain and reports whether one was
// found. Each shard is used at most once per chain, so every move's
// eligibility is independent of the others.
func (w *work) augment(start int, h homeless) bool {
	parent := make(map[int]step, len(w.ins))
	usedShard := make(map[uint32]bool)
	var queue []int

	// visit tries instance j as the receiver of the move s from `from`.
	// It returns true when j ends the chain.
	visit := func(from, j int, s uint32) bool {
		if _, seen := parent[j]; seen || j == start {
			return false
		}
		parent[j] = step{from: from, to: j, shard: s}
		if w.deficit(j) > 0 {
			return true
		}
		queue = append(queue, j)
		return false
	}
	// expand tries every copy i could give up, to every instance.
	expand := func(i int) (int, bool) {
		for _, s := range w.held[i] {
			if usedShard[s] || !w.holdsOwned(i, s) {
				continue
			}
			usedShard[s] = true
			hh := homeless{shard: s, src: w.srcIfDropped(i, s)}
			for j := range w.ins {
				if w.canTake(j, hh, i) && visit(i, j, s) {
					return j, true
				}
			}
		}
		return -1, false
	}

	end, found := -1, false
	if start < 0 {
		usedShard[h.shard] = true
		for j := range w.ins {
			if w.canTake(j, h, -1) && visit(-1, j, h.shard) {
				end, found = j, true
				break
			}
		}
	} else {
		end, found = expand(start)
	}
	for !found && len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		end, found = expand(i)
	}
	if !found {
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
		hh := h
		if st.from >= 0 {
			hh = w.drop(st.from, st.shard)
		}
		w.take(st.to, hh)
	}
	return true
}
