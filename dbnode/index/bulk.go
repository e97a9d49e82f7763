package index

import (
	"cmp"
	"fmt"
	"hash/maphash"
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
// AddString gives each series its ref at once (the series table, as
// Insert does) and only notes the ref for its block; Finish builds each
// block's postings in bulk: the new refs sorted and added in one go, and
// per label name (one goroutine per core, names are independent) the
// (value hash, series) pairs radix-sorted into the value table's order,
// so that the table is sized once and filled front to back (no growth,
// no probe through a cold table per series) and a value's postings are
// built from a sorted list instead of one bitmap add per series.
//
// Between AddString and Finish the noted refs are in no block: a Loader
// must not overlap DropBlocksBefore (which frees refs in no live block)
// or queries that expect the series (they see them after Finish). Open
// runs it before the node serves anything. The result is the same index
// Insert would have built (TestLoaderMatchesInsert).
type Loader struct {
	ix      *Index
	pending map[int64][]uint32 // block start -> refs noted (may repeat)
}

// NewLoader returns a Loader for ix.
func (ix *Index) NewLoader() *Loader {
	return &Loader{ix: ix, pending: map[int64][]uint32{}}
}

// AddString notes that series id (kept by the index, no copy, as
// InsertString) has data in the block of blockStart. The error is
// non-nil only for a malformed ID or ErrFull, as Insert's.
func (l *Loader) AddString(id string, blockStart int64) error {
	ix := l.ix
	start := ix.blockStartOf(blockStart)
	b := ix.block(start)
	if b == nil {
		return nil // block already expired
	}
	ref, err := ix.refFor(bytesOf(id), id)
	if err != nil {
		return err
	}
	if !b.has(ref) {
		l.pending[start] = append(l.pending[start], ref)
	}
	return nil
}

// refFor returns id's ref, creating the series if it is new. Straight to
// the stripe's write lock: a loader's series are mostly new.
func (ix *Index) refFor(id []byte, owned string) (uint32, error) {
	h := ix.series.hash(id)
	st := ix.series.stripeOf(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	if ref, ok := ix.series.find(st, h, id); ok {
		return ref, nil
	}
	if err := validateID(id); err != nil {
		return 0, fmt.Errorf("index insert %q: %w", id, err)
	}
	ref, _, err := ix.series.create(st, h, id, owned)
	if err != nil {
		return 0, fmt.Errorf("index insert %q: %w", id, err)
	}
	return ref, nil
}

// Finish adds every noted series to its block's postings. The Loader is
// empty afterwards and may be used again.
func (l *Loader) Finish() {
	starts := make([]int64, 0, len(l.pending))
	for s := range l.pending {
		starts = append(starts, s)
	}
	slices.Sort(starts)
	for _, s := range starts {
		refs := l.pending[s]
		delete(l.pending, s)
		if b := l.ix.block(s); b != nil {
			b.load(refs, l.ix.series)
		}
	}
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
	pairs = ld.sort(pairs)

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

// sort orders pairs by loadKey, stably (a run of one value stays in idx
// order): a least-significant-digit radix sort of the 36-bit key in
// three 12-bit passes. It returns the sorted slice, pairs or ld.tmp.
func (ld *valueLoader) sort(pairs []loadPair) []loadPair {
	const bits = 12
	ld.tmp = growTo(ld.tmp[:0], len(pairs))
	src, dst := pairs, ld.tmp
	var count [1 << bits]int
	for shift := 0; shift < 36; shift += bits {
		clear(count[:])
		for _, p := range src {
			count[loadKey(p.h)>>shift&(1<<bits-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, p := range src {
			d := loadKey(p.h) >> shift & (1<<bits - 1)
			dst[count[d]] = p
			count[d]++
		}
		src, dst = dst, src
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
