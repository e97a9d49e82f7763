package fileset

import (
	"container/list"
	"sync"
)

// PageCache is a byte-bounded LRU of decompressed data pages, shared by the
// readers opened with it so the memory spent on pages does not grow with
// the number of open filesets (thousands: shards x blocks). Cached pages are
// immutable; Read copies out of them. Safe for concurrent use.
type PageCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	lru   list.List // of *cachedPage, most recent at the front
	pages map[pageKey]*list.Element
}

type pageKey struct {
	reader uint64 // Reader.serial, unique per Open
	page   uint32
}

type cachedPage struct {
	key  pageKey
	data []byte
}

// DefaultPageCacheBytes is the budget of the cache used by Open.
const DefaultPageCacheBytes = 64 << 20

var defaultPageCache = NewPageCache(DefaultPageCacheBytes)

// NewPageCache returns a cache holding at most maxBytes of pages. A
// maxBytes of zero or less disables caching.
func NewPageCache(maxBytes int64) *PageCache {
	return &PageCache{max: maxBytes, pages: map[pageKey]*list.Element{}}
}

func (c *PageCache) get(k pageKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.pages[k]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cachedPage).data, true
}

func (c *PageCache) add(k pageKey, data []byte) {
	// A page bigger than a quarter of the budget would flush everything
	// else for one series; it is not worth caching.
	if int64(len(data)) > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pages[k]; ok {
		return // another goroutine loaded it concurrently
	}
	c.pages[k] = c.lru.PushFront(&cachedPage{key: k, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		c.removeElement(c.lru.Back())
	}
}

// purge drops every page of one reader, called when it closes.
func (c *PageCache) purge(reader uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*cachedPage).key.reader == reader {
			c.removeElement(el)
		}
		el = next
	}
}

func (c *PageCache) removeElement(el *list.Element) {
	p := c.lru.Remove(el).(*cachedPage)
	delete(c.pages, p.key)
	c.size -= int64(len(p.data))
}

// Size returns the bytes of pages currently cached.
func (c *PageCache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
