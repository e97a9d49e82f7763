package storage

import "iter"

// bucketList is a series' float buckets in the order they were opened
// (order matters: of two flushing buckets of one block, the older folds in
// first). Nearly every series has one bucket, so the first has a field of
// its own and the rest (a block boundary, a cold write) sit behind one
// pointer: the list costs a series 16 bytes instead of a slice header and
// an inline array (40), which keeps Series in the 256-byte size class.
// Guarded by the series' mu.
type bucketList struct {
	first *bucket
	rest  *[]*bucket // nil when the list has at most one bucket
}

func (l *bucketList) len() int {
	switch {
	case l.first == nil:
		return 0
	case l.rest == nil:
		return 1
	}
	return 1 + len(*l.rest)
}

// all yields the buckets in order.
func (l *bucketList) all() iter.Seq[*bucket] {
	return func(yield func(*bucket) bool) {
		if l.first == nil || !yield(l.first) || l.rest == nil {
			return
		}
		for _, b := range *l.rest {
			if !yield(b) {
				return
			}
		}
	}
}

func (l *bucketList) append(b *bucket) {
	switch {
	case l.first == nil:
		l.first = b
	case l.rest == nil:
		l.rest = &[]*bucket{b}
	default:
		*l.rest = append(*l.rest, b)
	}
}

// keep drops the buckets keep rejects, preserving the order of the rest.
// It allocates only when more than one bucket is kept: it runs on every
// series at every retention tick.
func (l *bucketList) keep(keep func(*bucket) bool) {
	if l.rest == nil {
		if l.first != nil && !keep(l.first) {
			l.first = nil
		}
		return
	}
	all := make([]*bucket, 0, l.len())
	for b := range l.all() {
		if keep(b) {
			all = append(all, b)
		}
	}
	*l = bucketList{}
	if len(all) > 0 {
		l.first = all[0]
	}
	if len(all) > 1 {
		rest := all[1:]
		l.rest = &rest
	}
}
