package index

import (
	"slices"
	"strings"
)

// BlockValues is how many distinct values each label name has in one
// block (ValueCounts).
type BlockValues struct {
	Start int64
	Names []NameValues // by name
}

// NameValues is one label name's number of distinct values.
type NameValues struct {
	Name   string
	Values int
}

// ValueCounts returns, for every block, each label name's number of
// distinct values: what a restart snapshot records so that the restart
// sizes the value tables it rebuilds once (ReserveValues).
func (ix *Index) ValueCounts() []BlockValues {
	var out []BlockValues
	for _, b := range ix.blocks.Load().sorted {
		b.mu.RLock()
		bv := BlockValues{Start: b.start, Names: make([]NameValues, 0, len(b.names))}
		for name, vs := range b.names {
			bv.Names = append(bv.Names, NameValues{Name: name, Values: vs.len()})
		}
		b.mu.RUnlock()
		slices.SortFunc(bv.Names, func(a, b NameValues) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, bv)
	}
	return out
}

// ReserveValues sizes the value tables that inserts create from now on,
// in the blocks of blocks' starts, for the values blocks names, each at
// most max: a restart rebuilding ten million series' index from its
// snapshot grew the table of a label with a value per series by steps,
// every step placing all its entries again at random (7% of a 10 M
// restart's CPU, docs/performance.md "values30"). A hint is taken once,
// by the first table of its name and block; ReserveValues(nil, 0) drops
// those not taken (a restart calls it when its load is done). Existing
// tables are not resized.
func (ix *Index) ReserveValues(blocks []BlockValues, max int) {
	ix.blocksMu.Lock()
	defer ix.blocksMu.Unlock()
	ix.hints = nil
	set := ix.blocks.Load()
	for _, bv := range blocks {
		hints := make(map[string]int, len(bv.Names))
		for _, nv := range bv.Names {
			if n := min(nv.Values, max); n > 0 {
				hints[nv.Name] = n
			}
		}
		if b := set.byStart[bv.Start]; b != nil {
			b.mu.Lock()
			b.hints = hints
			b.mu.Unlock()
			continue
		}
		if ix.hints == nil {
			ix.hints = map[int64]map[string]int{}
		}
		ix.hints[bv.Start] = hints
	}
	if blocks == nil {
		for _, b := range set.sorted {
			b.mu.Lock()
			b.hints = nil
			b.mu.Unlock()
		}
	}
}
