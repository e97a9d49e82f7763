package promapi

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// The fast path decides whether to decline a selection (errFallback: the
// plain engine evaluates the whole query) before it decodes a sample of
// it: native histograms in an operand of a binary operator, outputs that
// could collide once the name and metadata labels are dropped, more
// outputs than half the samples limit could hold. Those are known from
// the series list a read returns (its series' kinds, their label sets,
// how many there are), not from their samples. The read itself is not
// lost: the series read and not yet decoded are handed over to the
// plain engine's run of the query, whose selectors take them instead of
// reading storage (or the cluster) again. So a declined query reads its
// data once, as one the fast path answers does.

// handover holds the reads of one query's fast path attempt that it
// declined before decoding them, for the plain engine's run of the query.
type handover struct {
	mu sync.Mutex
	// reads are queued per key: two selectors of one query may read the
	// same selection, and the engine reads it once for each.
	reads map[string][]handedRead
}

// handedRead is a read's answer as storage gave it: its series, not yet
// decoded, and its error (a PartialError names damaged series).
type handedRead struct {
	its []tstorage.SeriesIterator
	err error
}

// readKey identifies a read: the namespace, the matchers in order and the
// range. The fast path reads a selection over the range the engine's
// hints give its selector, so the engine's read of it has the same key.
func readKey(ns string, ms []*labels.Matcher, start, end int64) string {
	var b strings.Builder
	b.WriteString(ns)
	for _, m := range ms {
		b.WriteByte(0)
		b.WriteString(m.String())
	}
	b.WriteByte(0)
	b.WriteString(strconv.FormatInt(start, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(end, 10))
	return b.String()
}

// keep stores a read none of whose samples has been decoded.
func (h *handover) keep(key string, its []tstorage.SeriesIterator, err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reads == nil {
		h.reads = make(map[string][]handedRead)
	}
	h.reads[key] = append(h.reads[key], handedRead{its: its, err: err})
}

// take removes and returns the read stored under key.
func (h *handover) take(key string) (handedRead, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.reads[key]
	if len(q) == 0 {
		return handedRead{}, false
	}
	r := q[0]
	if len(q) == 1 {
		delete(h.reads, key)
	} else {
		h.reads[key] = q[1:]
	}
	return r, true
}

// reader is b answering the reads handed over first (each once), or b
// itself when there are none.
func (h *handover) reader(b query.Reader) query.Reader {
	if h == nil {
		return b
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reads) == 0 {
		return b
	}
	return handoverReader{Reader: b, h: h}
}

type handoverReader struct {
	query.Reader
	h *handover
}

func (r handoverReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	if got, ok := r.h.take(readKey(ns, ms, start, end)); ok {
		return got.its, got.err
	}
	return r.Reader.Query(ctx, ns, ms, start, end)
}
