package index

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tessera-tsdb/tessera/ident"
)

// Prepared inserts are the restart's way into the index (issue 30 item
// 2): a restart inserts every series of memory, millions, all new, from
// one goroutine (the index's head block is one lock and one set of value
// tables: inserters on several cores only bounced them between caches).
// That goroutine was half of a snapshot restart's CPU, and half of its
// work depends on one series only: checking the ID, walking its labels,
// hashing the ID and each value. PrepareNewTagged does that part on the
// caller's goroutine (the loaders, one per core); AddPreparedBatch does
// the rest, called from one goroutine: the series' refs, then label
// name by label name (each value table looked up once a batch and
// filled alone, the names spread over the cores) instead of series by
// series. The result is the same as InsertNewTagged's of each series
// in turn (TestPreparedBatchMatchesInsert).

// PreparedBatch is a batch of series inserts prepared for one index. Its
// zero value is empty; Reset empties it for reuse, keeping its memory. A
// batch is not safe for concurrent use.
type PreparedBatch struct {
	ix     *Index
	series []preparedSeries
	labels []preparedLabel

	// AddPreparedBatch's scratch, kept across batches.
	refs   []uint32
	ids    []string
	names  []string
	counts []int
	group  []uint32
	order  []labelAt
	vals   []*values
}

// preparedSeries is one series of a batch: its labels are
// labels[lo:hi].
type preparedSeries struct {
	id     string
	h      uint64
	start  int64 // the block start
	tag    uint32
	lo, hi uint32
}

// preparedLabel is one label of non-empty value: offsets into the ID (so
// that the index keeps substrings of its stored ID, which may be another
// string of the same bytes) and the value's hash.
type preparedLabel struct {
	nameOff, nameLen uint32
	valOff, valLen   uint32
	tag              uint32
	part             uint8
}

// Len reports how many series the batch holds.
func (b *PreparedBatch) Len() int { return len(b.series) }

// Reset empties the batch, which may then be prepared for any index.
func (b *PreparedBatch) Reset() {
	clear(b.series) // drop the IDs, names and value tables held
	clear(b.ids)
	clear(b.names)
	clear(b.vals)
	b.ix, b.series, b.labels, b.ids = nil, b.series[:0], b.labels[:0], b.ids[:0]
}

// ReserveSeries sizes the series table for n more series at once (a
// restart loading a snapshot knows how many it holds): its stripes grow
// once instead of doubling their way there (a tenth of the restart's
// index stage at 5 M series).
func (ix *Index) ReserveSeries(n int) {
	per := int(ix.series.live.Load())/numStripes + n/numStripes + n/numStripes/8 + 16
	for i := range ix.series.stripes {
		st := &ix.series.stripes[i]
		st.mu.Lock()
		st.t.Reserve(per)
		st.mu.Unlock()
	}
}

// errOtherIndex: a batch holds the inserts of one index.
var errOtherIndex = errors.New("index: prepared batch holds another index's series")

// PrepareNewTagged prepares InsertNewTagged(id, blockStart, tag) into b,
// for AddPreparedBatch of the same index to insert. It may run on many
// goroutines at once (each its own batch). The error is InsertNewTagged's
// for a malformed ID (nothing is added to b then).
func (ix *Index) PrepareNewTagged(b *PreparedBatch, id string, blockStart int64, tag uint32) error {
	if b.ix != ix {
		if b.ix != nil {
			return errOtherIndex
		}
		b.ix = ix
	}
	bid := bytesOf(id)
	if len(id) == 0 || uint64(len(id)) > maxIDLen {
		return fmt.Errorf("index insert %q: %w", id, validateID(bid))
	}
	// One walk of the ID checks it as validateID does and records its
	// labels (two walks were a tenth of a snapshot load's loaders).
	lo := len(b.labels)
	base := uintptr(unsafe.Pointer(unsafe.StringData(id)))
	off := func(s []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(s))) - base) }
	var prev []byte
	bad := false
	err := ident.Range(bid, func(name, value []byte) {
		if bad || len(name) == 0 || (prev != nil && string(name) <= string(prev)) {
			bad = true
			return
		}
		prev = name
		if len(value) == 0 {
			return // not indexed (block.add)
		}
		part, vt := valueHash(ix.series.seed, stringOf(value))
		b.labels = append(b.labels, preparedLabel{nameOff: off(name), nameLen: uint32(len(name)),
			valOff: off(value), valLen: uint32(len(value)), tag: vt, part: uint8(part)})
	})
	if err != nil || bad {
		b.labels = b.labels[:lo]
		return fmt.Errorf("index insert %q: %w", id, validateID(bid)) // it words the failure
	}
	b.series = append(b.series, preparedSeries{id: id, h: ix.series.hash(bid), start: ix.blockStartOf(blockStart),
		tag: tag, lo: uint32(lo), hi: uint32(len(b.labels))})
	return nil
}

// AddPreparedBatch inserts the series of b, prepared for ix, as
// InsertNewTagged of each in turn would. b is left as it was (Reset it
// to reuse it). The error is ErrFull (the series before it are in).
//
// It holds ix.dropping throughout, so that retention frees no ref
// between its two steps (a ref found or created, then added to its
// block): InsertNewTagged holds the series' stripe lock across both
// instead, which here would order a stripe lock inside the block lock.
func (ix *Index) AddPreparedBatch(b *PreparedBatch) error {
	if len(b.series) == 0 {
		return nil
	}
	if b.ix != ix {
		return errOtherIndex
	}
	ix.dropping.Lock()
	defer ix.dropping.Unlock()
	b.refs = resize(b.refs, len(b.series))
	b.ids = resize(b.ids, len(b.series))
	// Each run of series of one block (nearly always the whole batch).
	for lo := 0; lo < len(b.series); {
		hi := lo + 1
		for hi < len(b.series) && b.series[hi].start == b.series[lo].start {
			hi++
		}
		blk := ix.block(b.series[lo].start)
		if blk == nil {
			lo = hi
			continue // expired: as InsertNewTagged, no ref either
		}
		// The series' refs: found or created under their stripe's lock.
		for i := lo; i < hi; i++ {
			p := &b.series[i]
			st := ix.series.stripeOf(p.h)
			st.mu.Lock()
			ref, ok := ix.series.find(st, p.h, bytesOf(p.id))
			s := p.id
			if ok {
				s = ix.series.id(ref)
			} else {
				var err error
				if ref, s, err = ix.series.create(st, p.h, bytesOf(p.id), p.id); err != nil {
					st.mu.Unlock()
					b.addRun(blk, lo, i, ix.series)
					return fmt.Errorf("index insert %q: %w", p.id, err)
				}
			}
			ix.series.ids.setTag(ref, p.tag)
			st.mu.Unlock()
			b.refs[i], b.ids[i] = ref, s
		}
		b.addRun(blk, lo, hi, ix.series)
		lo = hi
	}
	return nil
}

// parallelFillMin is the fewest labels a run fills on several
// goroutines: fewer are not worth starting them.
const parallelFillMin = 512

// skip marks, in PreparedBatch.refs, a series already in the block.
const skip = ^uint32(0)

// addRun adds series lo..hi of b (refs resolved) to blk under its lock
// once, the new ones' labels grouped by name: each name's value table is
// looked up once and then filled alone.
func (b *PreparedBatch) addRun(blk *block, lo, hi int, series *seriesTable) {
	blk.mu.Lock()
	defer blk.mu.Unlock()
	if blk.dropped {
		return
	}
	// Each label's group (its name's place in b.names), in label order.
	b.names, b.counts, b.group = b.names[:0], b.counts[:0], b.group[:0]
	for i := lo; i < hi; i++ {
		if !blk.all.CheckedAdd(b.refs[i]) {
			b.refs[i] = skip // in the block already, or a repeat
			continue
		}
		p, id := &b.series[i], b.ids[i]
		for k := p.lo; k < p.hi; k++ {
			l := &b.labels[k]
			name := id[l.nameOff : l.nameOff+l.nameLen]
			// Series of a batch mostly have the same label names in
			// the same order: try the group of the same position first.
			g := int(k - p.lo)
			if g >= len(b.names) || b.names[g] != name {
				g = 0
				for g < len(b.names) && b.names[g] != name {
					g++
				}
				if g == len(b.names) {
					b.names = append(b.names, name)
					b.counts = append(b.counts, 0)
				}
			}
			b.counts[g]++
			b.group = append(b.group, uint32(g))
		}
	}
	// A counting sort of the labels by group into b.order: per label its
	// index in b.labels and its series'.
	total := 0
	for g, c := range b.counts {
		b.counts[g] = total
		total += c
	}
	b.order = resize(b.order, total)
	j := 0
	for i := lo; i < hi; i++ {
		if b.refs[i] == skip {
			continue
		}
		p := &b.series[i]
		for k := p.lo; k < p.hi; k++ {
			g := b.group[j]
			b.order[b.counts[g]] = labelAt{label: k, series: uint32(i)}
			b.counts[g]++
			j++
		}
	}
	// Each name's value table is its own: the groups are filled on up
	// to GOMAXPROCS goroutines (the caller holds the block's lock for
	// them). One goroutine did it all, and it was the
	// restart's longest stage (5 M series: 11.5 of 14 s).
	b.vals = resize(b.vals, len(b.names))
	for g, name := range b.names {
		vals := blk.names[name]
		if vals == nil {
			vals = blk.newValues(name)
			blk.names[name] = vals
		}
		b.vals[g] = vals
	}
	fill := func(g int) int {
		start := 0
		if g > 0 {
			start = b.counts[g-1]
		}
		vals, pairs := b.vals[g], 0
		for _, at := range b.order[start:b.counts[g]] {
			l := &b.labels[at.label]
			v := b.ids[at.series][l.valOff : l.valOff+l.valLen]
			if vals.addHashed(v, int(l.part), l.tag, b.refs[at.series], series) {
				pairs++
			}
		}
		return pairs
	}
	workers := min(runtime.GOMAXPROCS(0), len(b.names))
	if workers < 2 || total < parallelFillMin {
		for g := range b.names {
			blk.pairs += fill(g)
		}
	} else {
		var next atomic.Int64
		var pairs atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 0
				for {
					g := int(next.Add(1) - 1)
					if g >= len(b.names) {
						break
					}
					n += fill(g)
				}
				pairs.Add(int64(n))
			}()
		}
		wg.Wait()
		blk.pairs += int(pairs.Load())
	}
	// Last, as block.add: a present bit means fully indexed.
	for i := lo; i < hi; i++ {
		if b.refs[i] != skip {
			blk.present.add(b.refs[i])
		}
	}
}

// labelAt is one label of a batch: its index in labels and its series'.
type labelAt struct{ label, series uint32 }

// resize returns s with n elements (contents unspecified), reusing its
// memory when it can.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
