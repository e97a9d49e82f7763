package encoding

// streamCursor is what the two stream decoders, floats (streamIterator)
// and histograms (histIterator), share: the bits, the samples left and
// read, the timestamp codec, and how iteration ends. Written once, the
// rules of the stream form (timestamps move forward, the data ends where
// the count says, an error ends iteration for good) cannot drift apart
// between the two kinds. noun names a decoder's samples in its errors
// ("sample", "histogram").
//
// Invariant: err != nil implies left == 0 and checked, so a decoder's
// Next needs to test only left before it decodes.
type streamCursor struct {
	r       bitReader
	left    uint32 // samples still to decode
	read    uint32 // samples decoded
	tc      tsCoder
	err     error
	checked bool // end of data verified
}

// end is Next's answer once no sample is left: false, after verifying,
// the first time only, that no bits follow the last sample (a stream that
// does not end where its count says was cut or overwritten).
func (c *streamCursor) end(noun string) bool {
	if !c.checked {
		c.checked = true
		if n, extra := trailingBits(&c.r); extra {
			c.err = corruptf("%d bits after the last of %d %ss", n, c.read, noun)
		}
	}
	return false
}

// timestamp decodes the next sample's timestamp: the first in full, each
// later one as a code that must move time forward.
func (c *streamCursor) timestamp(noun string) bool {
	if c.read == 0 {
		c.tc = newTSCoder(int64(c.r.readBits64(64)))
		return true
	}
	if t, inOrder := c.tc.decode(&c.r); !inOrder {
		return c.fail(corruptf("%s %d: timestamp %d not after %d", noun, c.read, t, c.tc.t))
	}
	return true
}

// finish ends the decoding of one sample: it fails if the bits ran out
// or a value code was malformed (!ok), and counts the sample otherwise.
func (c *streamCursor) finish(ok bool, noun string) bool {
	if !ok || !c.r.ok() {
		return c.failSample(noun)
	}
	c.read++
	c.left--
	return true
}

// failSample is finish's error, built out of line: truncation is named
// first, since bits that ran out also make a value code look malformed.
func (c *streamCursor) failSample(noun string) bool {
	if !c.r.ok() {
		return c.fail(corruptf("stream of %ss truncated at %s %d of %d", noun, noun, c.read, c.read+c.left))
	}
	return c.fail(corruptf("%s %d: malformed value code", noun, c.read))
}

// fail ends iteration with err.
func (c *streamCursor) fail(err error) bool {
	c.err = err
	c.left = 0
	c.checked = true
	return false
}

// trailingBits reports whether r has data left beyond the zero padding of
// its last byte, and how many bits are left.
func trailingBits(r *bitReader) (uint64, bool) {
	n := r.end - r.pos
	return n, n >= 8 || (r.pos&7 != 0 && r.readBits(uint(8-r.pos&7)) != 0)
}
