package index

import (
	"runtime"
	"strings"
	"sync"
)

// sortIDs sorts stored IDs by their bytes.
//
// IDs of one query tend to share long prefixes (`__name__` and its value
// come first, then labels whose values repeat), so a comparison sort spends
// its time re-comparing the same leading bytes. This is a multikey
// quicksort (Bentley & Sedgewick) that partitions on 8 bytes at a time:
// each level looks at one 64-bit word per ID and never revisits the bytes
// a group of IDs already agreed on.
//
// A query over every series sorts a million IDs, which took half a
// second on one core, the other idle (issue 30): past parallelSortMin IDs
// the halves are sorted at once, then merged from both ends at once
// (sortParallel), on up to GOMAXPROCS goroutines.
func sortIDs(ids []string) { sortIDsTags(ids, nil) }

// sortIDsTags is sortIDs moving tags (nil, or as long as ids) with their
// IDs (Index.QueryTagged).
func sortIDsTags(ids []string, tags []uint32) {
	sortParallel(ids, nil, tags, nil, runtime.GOMAXPROCS(0))
}

// parallelSortMin is the fewest IDs sortParallel splits between
// goroutines; a variable so that tests split small inputs.
var parallelSortMin = 1 << 15

// sortParallel sorts a on up to procs goroutines, with buf (nil, or as
// long as a) as room for the merge; t (nil, or as long as a) moves with
// a, tbuf its room.
func sortParallel(a, buf []string, t, tbuf []uint32, procs int) {
	if procs < 2 || len(a) < parallelSortMin {
		mkqsort(a, t, 0)
		return
	}
	if buf == nil {
		buf = make([]string, len(a))
	}
	if t != nil && tbuf == nil {
		tbuf = make([]uint32, len(t))
	}
	h := len(a) / 2
	var wg sync.WaitGroup
	wg.Go(func() { sortParallel(a[:h], buf[:h], part(t, 0, h), part(tbuf, 0, h), procs/2) })
	sortParallel(a[h:], buf[h:], part(t, h, len(a)), part(tbuf, h, len(a)), procs-procs/2)
	wg.Wait()
	// The first half of the merged output is the smallest h of both
	// halves and the rest the largest: two merges that share nothing.
	wg.Go(func() { mergeFront(buf[:h], a[:h], a[h:], part(tbuf, 0, h), part(t, 0, h), part(t, h, len(a))) })
	mergeBack(buf[h:], a[:h], a[h:], part(tbuf, h, len(a)), part(t, 0, h), part(t, h, len(a)))
	wg.Wait()
	copy(a, buf)
	copy(t, tbuf)
}

// part is t[lo:hi], nil for a nil t.
func part(t []uint32, lo, hi int) []uint32 {
	if t == nil {
		return nil
	}
	return t[lo:hi]
}

// mergeFront fills dst with the len(dst) first strings of the merge of
// the sorted x and y, x's first on ties (a stable merge); tdst, tx, ty
// (all nil or not) are the tags moving with them.
func mergeFront(dst, x, y []string, tdst, tx, ty []uint32) {
	i, j := 0, 0
	for k := range dst {
		if j < len(y) && (i == len(x) || y[j] < x[i]) {
			dst[k] = y[j]
			if tdst != nil {
				tdst[k] = ty[j]
			}
			j++
		} else {
			dst[k] = x[i]
			if tdst != nil {
				tdst[k] = tx[i]
			}
			i++
		}
	}
}

// mergeBack fills dst with the len(dst) last strings of the same stable
// merge as mergeFront's, from the end: y's first on ties.
func mergeBack(dst, x, y []string, tdst, tx, ty []uint32) {
	i, j := len(x)-1, len(y)-1
	for k := len(dst) - 1; k >= 0; k-- {
		if i >= 0 && (j < 0 || x[i] > y[j]) {
			dst[k] = x[i]
			if tdst != nil {
				tdst[k] = tx[i]
			}
			i--
		} else {
			dst[k] = y[j]
			if tdst != nil {
				tdst[k] = ty[j]
			}
			j--
		}
	}
}

// wordAt returns the 8 bytes of s at offset d as a big-endian integer,
// zero-padded, and how many of them s has (0-8). Comparing (word, n) pairs
// orders strings exactly as bytes do: a string that ends sorts before any
// that continues with a zero byte because its n is smaller.
func wordAt(s string, d int) (uint64, int) {
	if len(s)-d >= 8 {
		s = s[d : d+8]
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
			uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7]), 8
	}
	var w uint64
	n := max(len(s)-d, 0)
	for i := range n {
		w |= uint64(s[d+i]) << (56 - 8*i)
	}
	return w, n
}

func cmpWord(w1 uint64, n1 int, w2 uint64, n2 int) int {
	switch {
	case w1 < w2:
		return -1
	case w1 > w2:
		return 1
	}
	return n1 - n2
}

// mkqsort sorts a, whose elements agree on their first d bytes, moving
// t's elements (t nil, or as long as a) with a's.
func mkqsort(a []string, t []uint32, d int) {
	for len(a) > 1 {
		if len(a) <= 12 {
			for i := 1; i < len(a); i++ {
				for j := i; j > 0 && strings.Compare(a[j][d:], a[j-1][d:]) < 0; j-- {
					a[j], a[j-1] = a[j-1], a[j]
					if t != nil {
						t[j], t[j-1] = t[j-1], t[j]
					}
				}
			}
			return
		}
		pw, pn := medianWord(a, d)
		lt, i, gt := 0, 0, len(a)
		for i < gt {
			w, n := wordAt(a[i], d)
			switch c := cmpWord(w, n, pw, pn); {
			case c < 0:
				a[lt], a[i] = a[i], a[lt]
				if t != nil {
					t[lt], t[i] = t[i], t[lt]
				}
				lt++
				i++
			case c > 0:
				gt--
				a[i], a[gt] = a[gt], a[i]
				if t != nil {
					t[i], t[gt] = t[gt], t[i]
				}
			default:
				i++
			}
		}
		mkqsort(a[:lt], part(t, 0, lt), d)
		mkqsort(a[gt:], part(t, gt, len(a)), d)
		if pn < 8 {
			return // the middle group all ended here: equal
		}
		a, t, d = a[lt:gt], part(t, lt, gt), d+8
	}
}

// medianWord returns the median word of the first, middle and last element,
// so sorted and reverse-sorted inputs split evenly.
func medianWord(a []string, d int) (uint64, int) {
	w0, n0 := wordAt(a[0], d)
	w1, n1 := wordAt(a[len(a)/2], d)
	w2, n2 := wordAt(a[len(a)-1], d)
	if cmpWord(w0, n0, w1, n1) > 0 {
		w0, n0, w1, n1 = w1, n1, w0, n0
	}
	if cmpWord(w1, n1, w2, n2) > 0 {
		w1, n1 = w2, n2
		if cmpWord(w0, n0, w1, n1) > 0 {
			w1, n1 = w0, n0
		}
	}
	return w1, n1
}
