package commitlog

import "unsafe"

// arena hands out sub-slices of large chunks that are never reallocated,
// so the slices stay valid while later ones are handed out. It exists to
// keep per-entry allocations off the write path (async copies of batches)
// and the replay path (series IDs).
type arena[T any] struct {
	chunks [][]T
	cur    int // index of the chunk being filled
}

// arenaChunkBytes is the target size of one chunk.
const arenaChunkBytes = 1 << 20

func (a *arena[T]) chunkLen() int {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size == 0 {
		size = 1
	}
	return max(arenaChunkBytes/size, 1)
}

// alloc returns n zeroed-or-stale elements; callers overwrite all of them.
func (a *arena[T]) alloc(n int) []T {
	for a.cur < len(a.chunks) {
		c := a.chunks[a.cur]
		if cap(c)-len(c) >= n {
			a.chunks[a.cur] = c[:len(c)+n]
			return c[len(c) : len(c)+n : len(c)+n]
		}
		a.cur++
	}
	c := make([]T, n, max(n, a.chunkLen()))
	a.chunks = append(a.chunks, c)
	a.cur = len(a.chunks) - 1
	return c[:n:n]
}

// reset makes every chunk reusable. Elements are cleared so that pointers
// they hold (series IDs of finished batches) do not keep memory alive.
func (a *arena[T]) reset() {
	for i, c := range a.chunks {
		clear(c)
		a.chunks[i] = c[:0]
	}
	a.cur = 0
}
