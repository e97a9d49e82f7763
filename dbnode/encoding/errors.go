package encoding

import "errors"

// ErrOutOfOrder is returned by Encoder.Append for a timestamp that is not
// after the last one appended: streams hold strictly increasing timestamps so
// decoders and merges can rely on the order.
var ErrOutOfOrder = errors.New("encoding: timestamp not after the last one")

// ErrCorrupt is wrapped by every error a decoder reports for bytes that are not
// a valid stream or sealed block (truncated, trailing garbage, bad markers,
// timestamps that do not increase).
var ErrCorrupt = errors.New("encoding: corrupt data")

// ErrTooManySamples is returned by Encoder.Append when a stream already holds
// the most samples its header can count (2^32-1), or 2 GiB (maxStreamBytes):
// the encoder's state keeps a 32-bit length (bitWriter).
var ErrTooManySamples = errors.New("encoding: too many samples in one stream")
