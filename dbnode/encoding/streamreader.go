package encoding

// StreamReader is an Iterator that is pointed at one stream after
// another (Reset) without allocating: the restart snapshot's load reads
// millions of series of one stream each, and NewIterator allocated an
// iterator for every one (and its calls went through the interface).
// Its zero value is an empty stream.
type StreamReader struct {
	it    streamIterator
	bad   error // Reset's: the stream's header is unusable
	empty bool
}

// Reset points r at the start of stream, as NewIterator(stream) would.
func (r *StreamReader) Reset(stream []byte) {
	r.bad, r.empty = nil, len(stream) == 0
	if !r.empty {
		r.bad = r.it.reset(stream)
	}
}

// Next is Iterator's.
func (r *StreamReader) Next() bool {
	if r.empty || r.bad != nil {
		return false
	}
	return r.it.Next()
}

// At is Iterator's.
func (r *StreamReader) At() (int64, float64) { return r.it.At() }

// Err is Iterator's.
func (r *StreamReader) Err() error {
	switch {
	case r.bad != nil:
		return r.bad
	case r.empty:
		return nil
	}
	return r.it.Err()
}
