package rpc

import (
	"math/bits"
	"sync"
)

// sendPool holds the buffers write requests are built in (and that gRPC
// frees once sent). gRPC's default pool clears every buffer it hands out,
// a memclr of the whole request for an encoder that writes every byte of
// it anyway: a few percent of a coordinator's CPU. Buffers are kept in
// power-of-two tiers, one sync.Pool each.
type sendPool struct {
	tiers [40]sync.Pool // tier k: buffers of capacity 1<<k
}

var requestPool = &sendPool{}

// Get returns a buffer of length n, its contents undefined.
func (p *sendPool) Get(n int) *[]byte {
	k := 0
	if n > 1 {
		k = bits.Len(uint(n - 1))
	}
	if k < len(p.tiers) {
		if v, ok := p.tiers[k].Get().(*[]byte); ok {
			*v = (*v)[:n]
			return v
		}
		b := make([]byte, n, 1<<k)
		return &b
	}
	b := make([]byte, n)
	return &b
}

// Put keeps b for a later Get; buffers that did not come from Get are
// dropped.
func (p *sendPool) Put(b *[]byte) {
	c := cap(*b)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	if k := bits.TrailingZeros(uint(c)); k < len(p.tiers) {
		p.tiers[k].Put(b)
	}
}
