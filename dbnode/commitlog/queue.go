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
	bytes   int64  // estimated, see batchBytes
	group   *group // sync mode: the writers waiting on this queue

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

func (q *queue) reset() {
	clear(q.batches) // drop references to callers' batches
	q.batches = q.batches[:0]
	q.bytes = 0
	q.group = nil
	q.entries.reset()
	q.ids.reset()
}
