package encoding

import (
	"math"
)

// Stream header: a format byte, then the sample count as uint32 little
// endian, written in place by Bytes so it never copies.
const (
	streamFormat    = 0x01
	streamHeaderLen = 5
)

// emptyStream is Bytes() of an encoder that holds nothing.
var emptyStream = []byte{streamFormat, 0, 0, 0, 0}

// Encoder appends samples with strictly increasing timestamps to a stream.
// Not safe for concurrent use, Bytes included: it completes the stream in
// the encoder's buffer (header count, pending bits), so every call needs
// exclusive access. The zero value is empty and ready;
// an Encoder may be moved by value (the old copy no longer used), so it can
// live inline in its owner.
//
// It is 104 bytes, 13 words: storage keeps one inline in every in-memory
// series, and TestEncoderStateSize pins it (storage.TestSeriesLayout counts on
// it). The writer, timestamp and value coders are 24, 40 and 32 bytes
// without padding; the sample count and the value coder's count of
// decimals in a row share the last word with the owner's Mark.
type Encoder struct {
	w      bitWriter
	tc     tsCoder
	vc     valueCoder
	count  uint32
	intRun uint8 // valueCoder.encode's count of decimals in a row
	// Mark is the owner's one flag, never read or changed by the encoder
	// (the zero value is false; Append, Bytes and Reset keep it): it sits in the
	// padding of the last word, so that an owner keeping an encoder
	// inline beside a flag of its own need not pay a word for that flag
	// (storage's bucket keeps whether it is flushing here, which puts
	// storage.Series in a smaller size class).
	Mark bool
}

// NewEncoder returns an empty encoder.
func NewEncoder() *Encoder { return &Encoder{} }

// Append adds a sample. It returns ErrOutOfOrder if t is not after the last
// timestamp, ErrTooManySamples when the stream is full; the encoder is
// unchanged then.
func (e *Encoder) Append(t int64, v float64) error {
	if e.count == 0 {
		e.w.reset(streamHeaderLen)
		e.w.buf()[0] = streamFormat
		e.w.writeBits(uint64(t), 64)
		e.tc = newTSCoder(t)
		e.vc.encodeFirst(&e.w, v, &e.intRun)
	} else {
		if t <= e.tc.t {
			return ErrOutOfOrder
		}
		if e.count == math.MaxUint32 || e.w.n >= maxStreamBytes {
			return ErrTooManySamples
		}
		e.tc.encode(&e.w, t)
		e.vc.encode(&e.w, v, &e.intRun)
	}
	e.count++
	return nil
}

// Len returns the number of samples appended since creation or Reset.
func (e *Encoder) Len() int { return int(e.count) }

// LastTimestamp returns the last appended timestamp; undefined when Len is 0.
func (e *Encoder) LastTimestamp() int64 { return e.tc.t }

// Bytes returns a self-delimiting stream of every sample appended so far,
// readable by NewIterator. It does not copy: the caller must not modify it,
// and it is valid until the next Append or Reset. It writes into the
// encoder's buffer (see Encoder).
func (e *Encoder) Bytes() []byte {
	return e.w.stream(e.count, 1, emptyStream[:streamHeaderLen:streamHeaderLen])
}

// Size is len(Bytes()) without calling it: Bytes may grow the buffer of a
// short stream, which a statistic over every series must not do.
func (e *Encoder) Size() int { return e.w.streamSize(e.count, emptyStream) }

// Reset empties the encoder, keeping its buffer for reuse (and Mark).
func (e *Encoder) Reset() {
	w, mark := e.w, e.Mark
	*e = Encoder{}
	e.w.p, e.w.capc, e.Mark = w.p, w.capc, mark
}
