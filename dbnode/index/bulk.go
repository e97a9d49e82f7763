package index

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	mbits "math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
)

// Loader inserts many series at once: storage.Open's replay of the commit
// log, where every active series of the node goes into the index before
// anything queries it (issue 30: inserting them one by one was ~40% of a
// restart's CPU, on one goroutine, and the last thing the restart waited
// for).
//
// AddString only checks the ID and notes it with its block; Finish does
// the rest in bulk, in two steps.
//
//   - The series table: the noted IDs hashed (on every core), sorted by
//     stripe and tag (a stripe's slot order), and looked up and inserted
//     stripe by stripe, front to back through each stripe's table, sized
//     once: a lookup or insert per series in hash order touched a cold
//     slot (a cache miss) each. New series get their refs in the order
//     they were noted (so that refs follow the IDs' order in memory).
//   - Each block's postings: the new refs sorted and added at once, and
//     per label name (one goroutine per core, names are independent) the
//     (value hash, series) pairs radix-sorted into the value table's
//     order, so that the table is sized once and filled front to back
//     and a value's bitmap is built from a sorted list.
//
// Between AddString and Finish the noted series are not in the index. A
// Loader must not overlap DropBlocksBefore (which frees refs in no live
// block); Inserts meanwhile are safe (Finish holds every stripe's lock
// while it creates series). Open runs it before the node serves anything.
// The result is the index Insert would have built
// (TestLoaderMatchesModel).
type Loader struct {
	ix     *Index
	ids    []string // noted, in order
	starts []int64  // the block start of each
}

// NewLoader returns a Loader for ix.
func (ix *Index) NewLoader() *Loader { return &Loader{ix: ix} }

// AddString notes that series id (kept by the index, no copy, as
// InsertString) has data in the block of blockStart. The error is
// non-nil only for a malformed ID, as Insert's.
func (l *Loader) AddString(id string, blockStart int64) error {
	start := l.ix.blockStartOf(blockStart)
	if l.ix.block(start) == nil {
		return nil // block already expired
	}
	if err := validateID(bytesOf(id)); err != nil {
		return fmt.Errorf("index insert %q: %w", id, err)
	}
	l.ids = append(l.ids, id)
	l.starts = append(l.starts, start)
	return nil
}

// Finish adds every noted series to the index. The Loader is empty
// afterwards and may be used again. The error is ErrFull (the series
// that fit are in the index).
func (l *Loader) Finish() error {
	refs, err := l.ix.series.bulkRefs(l.ids)
	byStart := map[int64][]uint32{}
	for i, ref := range refs {
		if ref != noRef {
			byStart[l.starts[i]] = append(byStart[l.starts[i]], ref)
		}
	}
	l.ids, l.starts = nil, nil
	starts := make([]int64, 0, len(byStart))
	for s := range byStart {
		starts = append(starts, s)
	}
	slices.Sort(starts)
	for _, s := range starts {
		if b := l.ix.block(s); b != nil {
			b.load(byStart[s], l.ix.series)
		}
	}
	return err
}

// noRef marks a noted ID that got no ref (ErrFull).
const noRef = ^uint32(0)

// idKey is one noted ID in the series table's order: its stripe, then
// its tag.
type idKey struct {
	h uint64
	i uint32 // position in the noted IDs
}

func stripeKey(h uint64) uint64 { return (h%numStripes)<<32 | h>>32 }

// bulkRefs returns the ref of every ID, creating the series new to the
// table; repeats get one ref. It holds every stripe's lock throughout.
func (t *seriesTable) bulkRefs(ids []string) ([]uint32, error) {
	keys := make([]idKey, len(ids))
	parallel(len(ids), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			keys[i] = idKey{h: t.hash(bytesOf(ids[i])), i: uint32(i)}
		}
	})
	keys = radixSort(keys, make([]idKey, len(keys)), func(k idKey) uint64 { return stripeKey(k.h) }, 40)

	for i := range t.stripes {
		t.stripes[i].mu.Lock()
	}
	defer func() {
		for i := range t.stripes {
			t.stripes[i].mu.Unlock()
		}
	}()
	// Lookups, in slot order. A new ID's ref is, for now, ^(the position
	// of its first occurrence); an ID seen before in this batch has the
	// same hash, so it sits in the same run of equal hashes.
	refs := make([]uint32, len(ids))
	isNew := make([]bool, len(ids))
	dupOf := make([]int32, len(ids)) // a repeat: its first occurrence + 1
	var perStripe [numStripes]int
	for k := 0; k < len(keys); {
		j := k + 1
		for j < len(keys) && keys[j].h == keys[k].h {
			j++
		}
		run := keys[k:j]
		st := t.stripeOf(run[0].h)
		for x, key := range run {
			id := ids[key.i]
			if ref, ok := t.find(st, key.h, bytesOf(id)); ok {
				refs[key.i] = ref
				continue
			}
			first := -1
			for _, prev := range run[:x] {
				if isNew[prev.i] && ids[prev.i] == id {
					first = int(prev.i)
					break
				}
			}
			if first < 0 {
				isNew[key.i] = true
				perStripe[key.h%numStripes]++
			} else {
				dupOf[key.i] = int32(first) + 1 // its ref is set below
			}
		}
		k = j
	}
	// Refs for the new IDs, in the order they were noted.
	var err error
	t.mu.Lock()
	for i := range ids {
		if !isNew[i] {
			continue
		}
		var ref uint32
		if n := len(t.free); n > 0 {
			ref = t.free[n-1]
			t.free = t.free[:n-1]
		} else if t.next == math.MaxInt32 {
			err = ErrFull
			refs[i], isNew[i] = noRef, false
			continue
		} else {
			ref = t.next
			t.next++
		}
		refs[i] = ref
	}
	t.ids.grow(t.next)
	t.mu.Unlock()
	for i := range t.stripes {
		t.stripes[i].t.Reserve(t.stripes[i].t.Len() + perStripe[i])
	}
	var created int64
	for _, key := range keys {
		i := key.i
		if isNew[i] {
			t.ids.set(refs[i], ids[i])
			t.stripeOf(key.h).insert(uint32(key.h>>32), refs[i])
			created++
		}
	}
	for i, d := range dupOf {
		if d > 0 {
			refs[i] = refs[d-1]
		}
	}
	t.live.Add(created)
	if err != nil {
		err = fmt.Errorf("index insert: %w", err)
	}
	return refs, err
}

// parallel calls fn over [0, n) split in one range per core (one range
// when n is small).
func parallel(n int, fn func(lo, hi int)) {
	workers := max(1, min(runtime.GOMAXPROCS(0), n/4096))
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// loadPair is one label of one series being loaded: its value's hash,
// the series' position in the block's sorted list of new refs, and rep,
// the position of a series whose value for the label is known to be the
// same (compared while both IDs were at hand, see collectChunk): checking
// that a run of equal hashes is one value then reads one ID per rep, not
// one per series (reading every ID again was most of the bulk build).
type loadPair struct {
	h   uint64
	idx uint32
	rep uint32
}

// recentValues remembers, per label name of a chunk, recently seen
// values by hash (direct-mapped): a value seen again gets the rep of its
// first sighting after one comparison with bytes still in cache.
type recentValues [256]struct {
	h   uint64
	v   string
	rep uint32
}

// loadName is one label name's pairs, in idx order.
type loadName struct {
	name  string
	pairs []loadPair
}

// load adds refs (any order, repeats allowed) to the block in bulk.
func (b *block) load(refs []uint32, series *seriesTable) {
	slices.Sort(refs)
	refs = slices.Compact(refs)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped {
		return
	}
	fresh := refs
	if !b.all.IsEmpty() {
		fresh = make([]uint32, 0, len(refs))
		for _, r := range refs {
			if !b.all.Contains(r) {
				fresh = append(fresh, r)
			}
		}
	}
	if len(fresh) == 0 {
		return
	}
	b.all.AddMany(fresh)

	names := collectLabels(fresh, series)
	tables := make([]*values, len(names))
	for i, n := range names {
		vs := b.names[n.name]
		if vs == nil {
			vs = newValues(n.name)
			b.names[n.name] = vs
		}
		tables[i] = vs
	}
	// Largest first, so that the last name to finish is a small one.
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(len(names[y].pairs), len(names[x].pairs)) })
	var next, added atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ld valueLoader
			for {
				k := int(next.Add(1) - 1)
				if k >= len(order) {
					return
				}
				i := order[k]
				added.Add(int64(ld.load(tables[i], names[i].pairs, fresh, series)))
				names[i].pairs = nil // let the collector have it
			}
		}()
	}
	wg.Wait()
	b.pairs += int(added.Load())
	// As add: presence only after the postings.
	for _, r := range fresh {
		b.present.add(r)
	}
}

// collectLabels reads the labels of every series in fresh (sorted refs)
// into per-name pair lists, in parallel over chunks of fresh; each list is
// in idx order. Empty values are skipped, as add skips them.
func collectLabels(fresh []uint32, series *seriesTable) []loadName {
	workers := max(1, min(runtime.GOMAXPROCS(0), len(fresh)/4096))
	chunks := make([][]loadName, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := len(fresh)*w/workers, len(fresh)*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			chunks[w] = collectChunk(fresh[lo:hi], lo, series)
		}()
	}
	wg.Wait()
	if workers == 1 {
		return chunks[0]
	}
	// Merge by name, chunks in order (so that pairs stay in idx order).
	at := map[string]int{}
	var out []loadName
	var sizes []int
	for _, c := range chunks {
		for _, n := range c {
			i, ok := at[n.name]
			if !ok {
				i = len(out)
				at[n.name] = i
				out = append(out, loadName{name: n.name})
				sizes = append(sizes, 0)
			}
			sizes[i] += len(n.pairs)
		}
	}
	for i := range out {
		out[i].pairs = make([]loadPair, 0, sizes[i])
	}
	for _, c := range chunks {
		for _, n := range c {
			i := at[n.name]
			out[i].pairs = append(out[i].pairs, n.pairs...)
		}
	}
	return out
}

// collectChunk is collectLabels for refs (sorted), whose first is at
// position base of the block's list.
func collectChunk(refs []uint32, base int, series *seriesTable) []loadName {
	var out []loadName
	var recent []*recentValues // per name slot
	at := map[string]int{}
	// prev[k] is the name slot of the k-th label of the previous series:
	// series of one metric share their label names, in the same order, so
	// this usually saves the map lookup.
	var prev []int
	for i, ref := range refs {
		id := series.id(ref)
		k := 0
		for j := 0; j < len(id); k++ {
			name, ok := fieldAt(id, &j)
			if !ok {
				break
			}
			value, ok := fieldAt(id, &j)
			if !ok {
				break
			}
			if value == "" {
				continue
			}
			var s int
			if k < len(prev) && out[prev[k]].name == name {
				s = prev[k]
			} else {
				var seen bool
				if s, seen = at[name]; !seen {
					s = len(out)
					at[name] = s
					out = append(out, loadName{name: name, pairs: make([]loadPair, 0, len(refs))})
					recent = append(recent, new(recentValues))
				}
				for len(prev) <= k {
					prev = append(prev, 0)
				}
				prev[k] = s
			}
			h := maphash.String(series.seed, value)
			idx := uint32(base + i)
			rep := idx
			if c := &recent[s][h%uint64(len(recent[s]))]; c.h == h && c.v == value {
				rep = c.rep
			} else {
				c.h, c.v, c.rep = h, value, idx
			}
			out[s].pairs = append(out[s].pairs, loadPair{h: h, idx: idx, rep: rep})
		}
	}
	return out
}

// valueLoader holds one goroutine's scratch space for loading value
// tables.
type valueLoader struct {
	tmp    []loadPair
	refs   []uint32
	single []uint64 // bit per idx: the value of that series is its own
}

// loadKey is the order of a value table's slots: its part, then its tag
// (the slot's home rises with the tag).
func loadKey(h uint64) uint64 { return (h&(valueParts-1))<<32 | h>>32 }

// load adds pairs (series fresh[idx] has the value hashed to h) to vs and
// returns how many values were new to it. A table that already has values
// takes them one by one (values.add); an empty one is built in bulk.
func (ld *valueLoader) load(vs *values, pairs []loadPair, fresh []uint32, series *seriesTable) int {
	added := 0
	if vs.n > 0 {
		for _, p := range pairs {
			ref := fresh[p.idx]
			if vs.add(labelValue(series.id(ref), vs.name), ref, series) {
				added++
			}
		}
		return added
	}
	ld.tmp = growTo(ld.tmp[:0], len(pairs))
	pairs = radixSort(pairs, ld.tmp, func(p loadPair) uint64 { return loadKey(p.h) }, 36)

	var perPart [valueParts]int
	for i := 0; i < len(pairs); {
		j := runEnd(pairs, i)
		perPart[pairs[i].h&(valueParts-1)]++
		i = j
	}
	for p, n := range perPart {
		vs.parts[p].Reserve(n)
	}
	ld.single = growTo(ld.single[:0], (len(fresh)+63)/64)
	clear(ld.single)
	for i := 0; i < len(pairs); {
		j := runEnd(pairs, i)
		run := pairs[i:j]
		i = j
		h := run[0].h
		part, tag := int(h&(valueParts-1)), uint32(h>>32)
		if len(run) == 1 {
			vs.parts[part].Insert(tag, fresh[run[0].idx]+1)
			ld.single[run[0].idx/64] |= 1 << (run[0].idx % 64)
			vs.n++
			added++
			continue
		}
		v, same := sameValue(run, fresh, vs.name, series)
		if !same {
			// Two values whose hashes share part and tag: rare enough
			// to take the general path.
			for _, p := range run {
				ref := fresh[p.idx]
				if vs.add(labelValue(series.id(ref), vs.name), ref, series) {
					added++
				}
			}
			continue
		}
		ld.refs = ld.refs[:0]
		for _, p := range run {
			ld.refs = append(ld.refs, fresh[p.idx]) // idx order: ascending refs
		}
		idx := uint32(len(vs.multi))
		vs.multi = append(vs.multi, multiValue{value: v, bm: roaring.BitmapOf(ld.refs...)})
		vs.parts[part].Insert(tag, valueMulti|idx)
		vs.n++
		added++
	}
	ld.refs = ld.refs[:0]
	for w, bits := range ld.single {
		for bits != 0 {
			b := uint32(mbits.TrailingZeros64(bits))
			bits &= bits - 1
			ld.refs = append(ld.refs, fresh[uint32(w)*64+b])
		}
	}
	vs.singles.AddMany(ld.refs)
	return added
}

// runEnd returns the end of the run of pairs with pairs[i]'s loadKey.
func runEnd(pairs []loadPair, i int) int {
	k := loadKey(pairs[i].h)
	j := i + 1
	for j < len(pairs) && loadKey(pairs[j].h) == k {
		j++
	}
	return j
}

// sameValue reports whether every pair of run has one value, and which:
// a pair's value is its rep's, so only a rep not yet compared is read.
func sameValue(run []loadPair, fresh []uint32, name string, series *seriesTable) (string, bool) {
	v := labelValue(series.id(fresh[run[0].rep]), name)
	last := run[0].rep
	for _, p := range run[1:] {
		if p.h != run[0].h {
			return "", false
		}
		if p.rep == last {
			continue
		}
		if labelValue(series.id(fresh[p.rep]), name) != v {
			return "", false
		}
		last = p.rep
	}
	return v, true
}

// radixSort orders src by key (its low keyBits bits), stably: a
// least-significant-digit radix sort in passes of 12 bits or less. tmp
// is scratch of src's length; the result is src or tmp.
func radixSort[T any](src, tmp []T, key func(T) uint64, keyBits int) []T {
	const bits = 12
	var count [1 << bits]int
	for shift := 0; shift < keyBits; shift += bits {
		clear(count[:])
		for _, p := range src {
			count[key(p)>>shift&(1<<bits-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, p := range src {
			d := key(p) >> shift & (1<<bits - 1)
			tmp[count[d]] = p
			count[d]++
		}
		src, tmp = tmp, src
	}
	return src
}

// growTo returns s with length n, reusing its array when large enough.
func growTo[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
