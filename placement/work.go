package placement

import (
	"cmp"
	"slices"
)

// work is the mutable, index-based form of a placement that the algorithm
// edits. Instances are addressed by their index in ins (sorted by ID), shards
// by ID. Only the primitives in this file change copies, so the pairing of
// INITIALIZING and LEAVING copies holds between any two calls:
//
//   - take gives a homeless copy an owner;
//   - drop takes a non-LEAVING copy away from its owner and returns it
//     homeless.
//
// A homeless copy remembers its source: the instance that still holds the
// data (LEAVING) and will feed the next owner, or -1 when there is none.
type work struct {
	numShards  uint32
	rf         int
	maxSetID   uint32
	ins        []Instance // metadata; Shards is rebuilt by placement()
	group      []int      // isolation group index per instance
	numGroups  int
	active     []bool // may hold non-LEAVING copies and counts for targets
	target     []int
	count      []int      // non-LEAVING copies per instance
	gTarget    []int      // per group: sum of active members' targets
	gCount     []int      // per group: non-LEAVING copies
	copies     [][]wcopy  // per shard, every copy (LEAVING included)
	held       [][]uint32 // per instance, shards it may hold (stale entries allowed)
	homeless   []homeless
	wasPresent []bool // instance was in the input placement
	// origInit holds the source of every INITIALIZING copy of the input,
	// so re-routing can tell new bootstraps from old ones.
	origInit map[pairIdx]int
}

type pairIdx struct {
	inst  int
	shard uint32
}

type wcopy struct {
	inst    int
	state   ShardState
	src     int // instance streamed from (INITIALIZING only), -1 for none
	cutover int64
	cutoff  int64
}

type homeless struct {
	shard uint32
	src   int
}

// newWork loads p plus newcomers (which must not collide with p's IDs).
func newWork(p Placement, newcomers []Instance) *work {
	all := make([]Instance, 0, len(p.Instances)+len(newcomers))
	present := make(map[string]bool, len(p.Instances))
	for _, in := range p.Instances {
		all = append(all, in)
		present[in.ID] = true
	}
	all = append(all, newcomers...)
	slices.SortFunc(all, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })

	w := &work{
		numShards:  p.NumShards,
		rf:         p.ReplicaFactor,
		maxSetID:   p.MaxShardSetID,
		ins:        make([]Instance, len(all)),
		group:      make([]int, len(all)),
		active:     make([]bool, len(all)),
		target:     make([]int, len(all)),
		count:      make([]int, len(all)),
		copies:     make([][]wcopy, p.NumShards),
		held:       make([][]uint32, len(all)),
		wasPresent: make([]bool, len(all)),
		origInit:   make(map[pairIdx]int),
	}
	index := make(map[string]int, len(all))
	groups := make(map[string]int)
	for i, in := range all {
		index[in.ID] = i
		g, ok := groups[in.IsolationGroup]
		if !ok {
			g = len(groups)
			groups[in.IsolationGroup] = g
		}
		w.group[i] = g
		w.wasPresent[i] = present[in.ID]
		w.active[i] = !in.Leaving
		w.maxSetID = max(w.maxSetID, in.ShardSetID)
		meta := in
		meta.Shards = nil
		w.ins[i] = meta
	}
	w.numGroups = len(groups)
	w.gCount = make([]int, w.numGroups)
	w.gTarget = make([]int, w.numGroups)
	for i, in := range all {
		w.held[i] = make([]uint32, 0, len(in.Shards))
		for _, s := range in.Shards {
			src := -1
			if s.SourceID != "" {
				src = index[s.SourceID]
			}
			w.copies[s.ID] = append(w.copies[s.ID], wcopy{inst: i, state: s.State, src: src, cutover: s.CutoverNanos, cutoff: s.CutoffNanos})
			w.held[i] = append(w.held[i], s.ID)
			if s.State == Initializing {
				w.origInit[pairIdx{i, s.ID}] = src
			}
			if s.State != Leaving {
				w.count[i]++
				w.gCount[w.group[i]]++
			}
		}
	}
	return w
}

func (w *work) indexOf(id string) (int, bool) {
	return slices.BinarySearchFunc(w.ins, id, func(in Instance, id string) int { return cmp.Compare(in.ID, id) })
}

// find returns the position of instance i's copy of shard s, or -1.
func (w *work) find(s uint32, i int) int {
	for k, c := range w.copies[s] {
		if c.inst == i {
			return k
		}
	}
	return -1
}

// groupOwns reports whether a non-LEAVING copy of s other than except's sits
// in group g.
func (w *work) groupOwns(s uint32, g, except int) bool {
	for _, c := range w.copies[s] {
		if c.state != Leaving && c.inst != except && w.group[c.inst] == g {
			return true
		}
	}
	return false
}

// canTake reports whether active instance j may become an owner of the
// homeless copy h, ignoring instance except's copy (the one about to be
// dropped to produce h; -1 for none). j must hold no copy of the shard,
// unless it holds the LEAVING copy h streams from: then taking it back
// undoes the move.
func (w *work) canTake(j int, h homeless, except int) bool {
	if !w.active[j] || j == except {
		return false
	}
	if k := w.find(h.shard, j); k >= 0 {
		if w.copies[h.shard][k].state != Leaving || h.src != j {
			return false
		}
	}
	return !w.groupOwns(h.shard, w.group[j], except)
}

// take makes j an owner of h: the LEAVING source itself becomes AVAILABLE
// again, anyone else gets an INITIALIZING copy streaming from the source.
func (w *work) take(j int, h homeless) {
	if k := w.find(h.shard, j); k >= 0 {
		c := &w.copies[h.shard][k]
		c.state, c.src, c.cutoff = Available, -1, 0
	} else {
		w.copies[h.shard] = append(w.copies[h.shard], wcopy{inst: j, state: Initializing, src: h.src})
		w.held[j] = append(w.held[j], h.shard)
	}
	w.count[j]++
	w.gCount[w.group[j]]++
}

// drop takes instance i's non-LEAVING copy of s away. An AVAILABLE copy turns
// LEAVING and becomes the source of the homeless copy; an INITIALIZING copy
// is deleted and hands its own source on.
func (w *work) drop(i int, s uint32) homeless {
	k := w.find(s, i)
	c := &w.copies[s][k]
	w.count[i]--
	w.gCount[w.group[i]]--
	if c.state == Available {
		c.state = Leaving
		return homeless{shard: s, src: i}
	}
	src := c.src
	w.copies[s] = slices.Delete(w.copies[s], k, k+1)
	return homeless{shard: s, src: src}
}

// holdsOwned reports whether i holds a non-LEAVING copy of s.
func (w *work) holdsOwned(i int, s uint32) bool {
	k := w.find(s, i)
	return k >= 0 && w.copies[s][k].state != Leaving
}

// srcIfDropped is the source a homeless copy would carry if i dropped s.
func (w *work) srcIfDropped(i int, s uint32) int {
	c := w.copies[s][w.find(s, i)]
	if c.state == Available {
		return i
	}
	return c.src
}

// deactivate drops every non-LEAVING copy of instance i into the homeless
// queue and takes i out of the target computation.
func (w *work) deactivate(i int) {
	for _, s := range w.held[i] {
		if w.holdsOwned(i, s) {
			h := w.drop(i, s)
			w.homeless = append(w.homeless, h)
		}
	}
	w.active[i] = false
}

// activeGroups counts the isolation groups with at least one active
// instance.
func (w *work) activeGroups() int {
	seen := make([]bool, w.numGroups)
	n := 0
	for i, a := range w.active {
		if a && !seen[w.group[i]] {
			seen[w.group[i]] = true
			n++
		}
	}
	return n
}

// setTargets computes targets for the active instances. extraPref adds to
// an instance's rounding preference (replace uses it to let a newcomer
// inherit the count of the instance it replaces).
func (w *work) setTargets(extraPref map[int]int) {
	restorable := make([]int, len(w.ins))
	for _, h := range w.homeless {
		if h.src >= 0 && w.active[h.src] && w.canTake(h.src, h, -1) {
			restorable[h.src]++
		}
	}
	var in []targetInput
	var idx []int
	for i, a := range w.active {
		if !a {
			continue
		}
		in = append(in, targetInput{
			group:  w.group[i],
			weight: uint64(w.ins[i].Weight),
			pref:   w.count[i] + restorable[i] + extraPref[i],
		})
		idx = append(idx, i)
	}
	t := computeTargets(uint64(w.numShards), w.rf, w.numGroups, in)
	w.gTarget = make([]int, w.numGroups)
	w.gCount = make([]int, w.numGroups)
	for i := range w.target {
		w.target[i] = 0
		w.gCount[w.group[i]] += w.count[i]
	}
	for k, i := range idx {
		w.target[i] = t[k]
		w.gTarget[w.group[i]] += t[k]
	}
}

func (w *work) deficit(i int) int { return w.target[i] - w.count[i] }

// placement materialises the work back into a canonical Placement. Instances
// that hold nothing and may not receive anything (removed, drained) are
// dropped.
func (w *work) placement(version int64) Placement {
	shards := make([][]Shard, len(w.ins))
	for s, cs := range w.copies {
		for _, c := range cs {
			sh := Shard{ID: uint32(s), State: c.state, CutoverNanos: c.cutover, CutoffNanos: c.cutoff}
			if c.state == Initializing && c.src >= 0 {
				sh.SourceID = w.ins[c.src].ID
			}
			shards[c.inst] = append(shards[c.inst], sh)
		}
	}
	p := Placement{
		NumShards:     w.numShards,
		ReplicaFactor: w.rf,
		IsSharded:     true,
		MaxShardSetID: w.maxSetID,
		Version:       version,
	}
	for i, in := range w.ins {
		if len(shards[i]) == 0 && !w.active[i] {
			continue
		}
		in.Shards = shards[i]
		in.Leaving = !w.active[i]
		p.Instances = append(p.Instances, in)
	}
	sortInstances(p.Instances)
	return p
}
