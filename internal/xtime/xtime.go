// Package xtime is arithmetic on unix-millisecond timestamps that stays
// correct at the int64 edges: user input (remote write, remote read and
// query ranges) can carry any int64, and a wrapped block start or age
// answers the wrong blocks or prints nonsense.
package xtime

import "math"

// BlockStart returns the start of the block of size ms holding t: floor
// division, correct for negative t. When that start is below MinInt64
// (t within one block of MinInt64) it returns MinInt64, still <= t, so a
// range [BlockStart(from), BlockStart(to)] always covers [from, to].
// size must be positive.
func BlockStart(t, size int64) int64 {
	r := t % size
	if r >= 0 {
		return t - r
	}
	up := t - r // > t, the next block boundary: no overflow
	if up < math.MinInt64+size {
		return math.MinInt64
	}
	return up - size
}

// Add returns a+b, saturated at MinInt64 and MaxInt64 instead of wrapping.
func Add(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}
