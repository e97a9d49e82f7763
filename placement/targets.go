package placement

import (
	"cmp"
	"math/bits"
	"slices"
)

// The targets say how many non-LEAVING copies each instance should hold.
// They are computed in two levels so that isolation groups stay feasible:
//
//  1. Each group's ideal share of numShards*RF copies is proportional to its
//     total weight, but a group can own at most numShards copies (one per
//     shard). Groups whose share exceeds that are capped and the rest is
//     shared among the others again ("water filling").
//  2. Within a group, the group's integer target is shared in proportion to
//     weight.
//
// At both levels the ideal is rounded with the largest-remainder method:
// everyone gets the floor, and the leftover units go first to those that
// already hold more than their floor (so rounding never forces a move),
// then to the largest remainders, then in ID order. Every target is
// therefore the floor or the ceiling of the instance's ideal share, which
// with equal weights keeps max - min <= 1.

// targetInput describes one active instance for target computation.
type targetInput struct {
	group  int
	weight uint64
	// pref is what the instance would hold if nothing moved; it only
	// steers rounding.
	pref int
}

// computeTargets returns the integer target of each input instance. The
// caller has checked that there are at least rf groups.
func computeTargets(numShards uint64, rf int, numGroups int, ins []targetInput) []int {
	gw := make([]uint64, numGroups)
	gpref := make([]int, numGroups)
	for _, in := range ins {
		gw[in.group] += in.weight
		gpref[in.group] += in.pref
	}
	gTarget := groupTargets(numShards, uint64(rf), gw, gpref)

	byGroup := make([][]int, numGroups)
	for i, in := range ins {
		byGroup[in.group] = append(byGroup[in.group], i)
	}
	out := make([]int, len(ins))
	for g, members := range byGroup {
		if len(members) == 0 {
			continue
		}
		w := make([]uint64, len(members))
		pref := make([]int, len(members))
		for k, i := range members {
			w[k], pref[k] = ins[i].weight, ins[i].pref
		}
		for k, t := range apportion(gTarget[g], w, pref) {
			out[members[k]] = int(t)
		}
	}
	return out
}

// groupTargets water-fills numShards*rf copies over groups by weight with a
// cap of numShards per group.
func groupTargets(numShards, rf uint64, gw []uint64, gpref []int) []uint64 {
	out := make([]uint64, len(gw))
	pool := make([]int, 0, len(gw))
	for g, w := range gw {
		if w > 0 {
			pool = append(pool, g)
		}
	}
	remaining := numShards * rf
	for {
		var poolW uint64
		for _, g := range pool {
			poolW += gw[g]
		}
		// Cap every group whose share exceeds numShards: remaining*w/poolW > numShards.
		next := pool[:0:0]
		for _, g := range pool {
			if cmpMul(remaining, gw[g], numShards, poolW) > 0 {
				out[g] = numShards
				remaining -= numShards
			} else {
				next = append(next, g)
			}
		}
		if len(next) == len(pool) {
			break
		}
		pool = next
	}
	w := make([]uint64, len(pool))
	pref := make([]int, len(pool))
	for k, g := range pool {
		w[k], pref[k] = gw[g], gpref[g]
	}
	for k, t := range apportion(remaining, w, pref) {
		out[pool[k]] = t
	}
	return out
}

// apportion splits total in proportion to weights by largest remainder,
// breaking ties in favour of members whose pref exceeds their floor, then
// larger remainders, then lower index.
func apportion(total uint64, weights []uint64, pref []int) []uint64 {
	var sumW uint64
	for _, w := range weights {
		sumW += w
	}
	out := make([]uint64, len(weights))
	if sumW == 0 {
		return out
	}
	rem := make([]uint64, len(weights))
	var given uint64
	for i, w := range weights {
		out[i], rem[i] = mulDiv(total, w, sumW)
		given += out[i]
	}
	extra := total - given
	if extra == 0 {
		return out
	}
	order := make([]int, 0, len(weights))
	for i := range weights {
		if rem[i] > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		pa, pb := uint64(max(pref[a], 0)) > out[a], uint64(max(pref[b], 0)) > out[b]
		if pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(rem[b], rem[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, i := range order[:extra] {
		out[i]++
	}
	return out
}

// mulDiv returns a*b/c and its remainder without overflowing; the quotient
// must fit in 64 bits (it does: a*b/c <= a whenever b <= c).
func mulDiv(a, b, c uint64) (q, r uint64) {
	hi, lo := bits.Mul64(a, b)
	return bits.Div64(hi, lo, c)
}

// cmpMul compares a*b with c*d exactly.
func cmpMul(a, b, c, d uint64) int {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	if c := cmp.Compare(h1, h2); c != 0 {
		return c
	}
	return cmp.Compare(l1, l2)
}
