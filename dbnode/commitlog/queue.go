package commitlog

// group is the unit of group commit: every sync-mode batch queued between
// two flushes shares one write+fsync and one result.
type group struct {
	done chan struct{} // closed once err is set
	err  error
}

// queue holds batches accepted by Write and not yet handed to the file.
// Log keeps two and swaps them, so writers fill one while the flusher
// writes the other.
type queue struct {
	batches [][]Entry
	hists   [][]HistEntry // the histograms of batches[i], nil for none
	bytes   int64         // estimated, see batchBytes
	group   *group        // sync mode: the writers waiting on this queue

	// Async mode copies batches (the caller may reuse its slice as soon as
	// Write returns) into these arenas, which are reused after each flush.
	entries arena[Entry]
	ids     arena[byte]
}

// entryOverhead bounds the encoded size of one sample plus its share of a
// series definition, beyond the ID bytes themselves.
const entryOverhead = 40

// batchBytes estimates what batch costs while pending: its ID bytes plus a
// per-entry bound on the encoding. It is what MaxPending limits.
func batchBytes(batch []Entry) (est int64, idBytes int) {
	for i := range batch {
		idBytes += len(batch[i].ID)
	}
	return int64(idBytes) + int64(len(batch))*entryOverhead, idBytes
}

// appendCopy queues a private copy of batch (async mode).
func (q *queue) appendCopy(batch []Entry, idBytes int) {
	ents := q.entries.alloc(len(batch))
	copy(ents, batch)
	ids := q.ids.alloc(idBytes)
	for i := range ents {
		n := copy(ids, ents[i].ID)
		ents[i].ID = ids[:n:n]
		ids = ids[n:]
	}
	q.batches = append(q.batches, ents)
}

// histBytes is batchBytes for histogram samples: their bucket counts
// bound their encoding.
func histBytes(hist []HistEntry) (est int64, idBytes int) {
	for i := range hist {
		h := &hist[i]
		idBytes += len(h.ID)
		n := 0
		if h.H != nil {
			n = len(h.H.PositiveBuckets) + len(h.H.NegativeBuckets) + len(h.H.PositiveSpans) + len(h.H.NegativeSpans) + len(h.H.CustomValues)
		} else if h.FH != nil {
			n = len(h.FH.PositiveBuckets) + len(h.FH.NegativeBuckets) + len(h.FH.PositiveSpans) + len(h.FH.NegativeSpans) + len(h.FH.CustomValues)
		}
		est += int64(len(h.ID)) + entryOverhead + 64 + 10*int64(n)
	}
	return est, idBytes
}

// appendHistCopy pairs the batch just queued by appendCopy with a private
// copy of its histograms (async mode): nil when it has none.
func (q *queue) appendHistCopy(hist []HistEntry, idBytes int) {
	if len(hist) == 0 {
		q.hists = append(q.hists, nil)
		return
	}
	hs := make([]HistEntry, len(hist))
	copy(hs, hist)
	ids := make([]byte, idBytes)
	for i := range hs {
		n := copy(ids, hs[i].ID)
		hs[i].ID = ids[:n:n]
		ids = ids[n:]
		if hs[i].H != nil {
			hs[i].H = hs[i].H.Copy()
		}
		if hs[i].FH != nil {
			hs[i].FH = hs[i].FH.Copy()
		}
	}
	q.hists = append(q.hists, hs)
}

func (q *queue) reset() {
	clear(q.batches) // drop references to callers' batches
	q.batches = q.batches[:0]
	clear(q.hists)
	q.hists = q.hists[:0]
	q.bytes = 0
	q.group = nil
	q.entries.reset()
	q.ids.reset()
}
