// Package slots is the open-addressing hash table (Table) that holds a
// node's per-series entries: the storage shard maps, the tag index's
// ID -> ref stripes and value tables, the HTTP series cache. One
// implementation, one deletion scheme (backward shift), one property test
// against a Go map (TestTableMatchesGoMap); Home, Next, Grow and Between
// are its arithmetic.
//
// Tables grow in steps of 1.5 and 4/3 (sizes 2^k and 3*2^(k-1)) instead of
// doubling, so a table at most 3/4 full is never less than half full
// after growing (3/8 when doubling): at a million series each of those
// tables was just past a doubling, 8 bytes a slot at load 0.48, about
// 17 bytes a series per table. A size that is not a power of two is
// addressed by scaling the hash (Home) rather than masking it.
package slots

// Home is the slot a probe for hash h starts at in a table of n slots:
// h scaled to [0, n), a multiply and a shift (Lemire's fast range), so
// that n need not be a power of two. The high bits of h decide it.
func Home(h uint32, n int) int { return int(uint64(h) * uint64(n) >> 32) }

// Next is the slot after i in a table of n slots (linear probing, wrapping).
func Next(i, n int) int {
	if i++; i == n {
		return 0
	}
	return i
}

// Grow returns the size of a table that outgrew n slots: min if n is
// smaller, else n*3/2 from a power of two and n*4/3 from 3*2^(k-1).
// min must be a power of two, at least 4.
func Grow(n, min int) int {
	if n < min {
		return min
	}
	if n&(n-1) == 0 {
		return n + n/2
	}
	return n + n/3
}

// Between reports whether home lies cyclically in (hole, j], positions in
// one table: the backward-shift deletion of linear probing moves the slot
// at j into the hole unless it does.
func Between(hole, j, home int) bool {
	if hole < j {
		return hole < home && home <= j
	}
	return hole < home || home <= j
}
