// Package retain bounds the buffers a pool keeps between requests.
//
// A pooled buffer grows to the largest request it served and keeps that
// size: one 32 MiB body, or one series of 100,000 labels, left every
// pooled request state holding its peak, and a node holding 15 series sat
// at 1.9 GB resident after eight such requests at once. A buffer over
// MaxBytes is dropped instead of kept (the next request that needs as
// much allocates it again); the common request reuses its buffers as
// before.
package retain

import (
	"runtime/debug"
	"sync"
	"time"
	"unsafe"
)

// MaxBytes is the largest buffer a pool keeps: above a typical remote
// write request (Prometheus sends at most 2,000 samples, ~100 KiB, per
// request by default; agents batching 10,000 a few MiB).
const MaxBytes = 4 << 20

// Slice returns s, or nil when its backing array is over MaxBytes; over
// reports which.
func Slice[S ~[]E, E any](s S) (_ S, over bool) {
	var e E
	if uintptr(cap(s))*unsafe.Sizeof(e) > MaxBytes {
		return nil, true
	}
	return s, false
}

// Bytes is the size of s's backing array (its capacity in bytes), for a
// caller that weighs several buffers of one struct.
func Bytes[S ~[]E, E any](s S) int {
	var e E
	return cap(s) * int(unsafe.Sizeof(e))
}

// Trim sets *s to nil when its backing array is over MaxBytes, and then
// sets *over, so one flag collects a whole struct's fields.
func Trim[S ~[]E, E any](over *bool, s *S) {
	var o bool
	if *s, o = Slice(*s); o {
		*over = true
	}
}

// Releaser returns the memory of dropped buffers to the operating system
// once the requests that grew them are over: dropping a buffer makes it
// garbage, but an idle node allocates too little to start a collection
// (the runtime forces one only every two minutes), and the scavenger
// returns freed pages slowly. Dropped schedules one debug.FreeOSMemory
// Quiet after the last drop, so a burst of large requests costs one
// collection after it, and a steady stream of them (whose buffers are
// needed again at once) none. Safe for concurrent use.
type Releaser struct {
	Quiet time.Duration
	mu    sync.Mutex
	t     *time.Timer
	// free is what a timer runs; debug.FreeOSMemory but in tests.
	free func()
}

// Dropped notes that a buffer over MaxBytes was dropped.
func (r *Releaser) Dropped() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.t != nil {
		r.t.Reset(r.Quiet)
		return
	}
	free := r.free
	if free == nil {
		free = debug.FreeOSMemory
	}
	r.t = time.AfterFunc(r.Quiet, free)
}

// Stop cancels a scheduled release.
func (r *Releaser) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.t != nil {
		r.t.Stop()
	}
}
