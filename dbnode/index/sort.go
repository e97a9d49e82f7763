package index

import "strings"

// sortIDs sorts stored IDs by their bytes.
//
// IDs of one query tend to share long prefixes (`__name__` and its value
// come first, then labels whose values repeat), so a comparison sort spends
// its time re-comparing the same leading bytes. This is a multikey
// quicksort (Bentley & Sedgewick) that partitions on 8 bytes at a time:
// each level looks at one 64-bit word per ID and never revisits the bytes
// a group of IDs already agreed on.
func sortIDs(ids []string) { mkqsort(ids, 0) }

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

// mkqsort sorts a, whose elements agree on their first d bytes.
func mkqsort(a []string, d int) {
	for len(a) > 1 {
		if len(a) <= 12 {
			for i := 1; i < len(a); i++ {
				for j := i; j > 0 && strings.Compare(a[j][d:], a[j-1][d:]) < 0; j-- {
					a[j], a[j-1] = a[j-1], a[j]
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
				lt++
				i++
			case c > 0:
				gt--
				a[i], a[gt] = a[gt], a[i]
			default:
				i++
			}
		}
		mkqsort(a[:lt], d)
		mkqsort(a[gt:], d)
		if pn < 8 {
			return // the middle group all ended here: equal
		}
		a, d = a[lt:gt], d+8
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
