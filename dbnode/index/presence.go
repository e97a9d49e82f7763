package index

import "sync/atomic"

const (
	presencePageBits  = 16 // refs per page: 65536, 8 KiB
	presencePageWords = 1 << presencePageBits / 64
)

type presencePage [presencePageWords]atomic.Uint64

// presence is a grow-only set of refs that can be tested without a lock:
// the write path's "is this series already in the block?" check, which
// would otherwise take the block's read lock (a cache line every writer
// core bounces) for every sample batch. It mirrors block.all, costs one bit
// per ref slot, and is only added to under the block's write lock, after the
// postings, so a set bit means the series is fully indexed.
type presence struct {
	pages atomic.Pointer[[]*presencePage] // replaced, never mutated, when it grows
}

func (p *presence) has(ref uint32) bool {
	pages := p.pages.Load()
	i := int(ref >> presencePageBits)
	if pages == nil || i >= len(*pages) || (*pages)[i] == nil {
		return false
	}
	w := (*pages)[i][ref%(1<<presencePageBits)/64].Load()
	return w&(1<<(ref%64)) != 0
}

// add sets ref. Callers serialise adds (the block's write lock).
func (p *presence) add(ref uint32) {
	i := int(ref >> presencePageBits)
	cur := p.pages.Load()
	if cur == nil || i >= len(*cur) || (*cur)[i] == nil {
		var n int
		if cur != nil {
			n = len(*cur)
		}
		next := make([]*presencePage, max(n, i+1))
		if cur != nil {
			copy(next, *cur)
		}
		next[i] = new(presencePage)
		p.pages.Store(&next)
		cur = &next
	}
	(*cur)[i][ref%(1<<presencePageBits)/64].Or(1 << (ref % 64))
}
