package remote

import (
	"fmt"
	"io"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
)

// DecodeReadRequest parses a snappy-compressed prompb.ReadRequest body.
func DecodeReadRequest(compressed []byte, maxBytes int64) (*prompb.ReadRequest, error) {
	raw, err := Decompress(compressed, maxBytes)
	if err != nil {
		return nil, err
	}
	var req prompb.ReadRequest
	if err := req.Unmarshal(raw); err != nil {
		return nil, inputErr("bad protobuf: read request: %v", err)
	}
	return &req, nil
}

// TooLargeError is a body over the configured limit (HTTP 413).
type TooLargeError struct{ Size, Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request body of %d bytes is over the limit of %d bytes", e.Size, e.Limit)
}

// Decompress snappy-decodes a block-format body after checking its
// declared decoded length against maxBytes, so a small body cannot expand
// into an out-of-memory.
func Decompress(compressed []byte, maxBytes int64) ([]byte, error) {
	return DecompressInto(nil, compressed, maxBytes)
}

// DecompressInto is Decompress reusing dst's capacity.
func DecompressInto(dst, compressed []byte, maxBytes int64) ([]byte, error) {
	n, err := snappy.DecodedLen(compressed)
	if err != nil {
		return nil, inputErr("bad snappy: %v", err)
	}
	if int64(n) > maxBytes {
		return nil, &TooLargeError{Size: int64(n), Limit: maxBytes}
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	out, err := snappy.Decode(dst[:cap(dst)], compressed)
	if err != nil {
		return nil, inputErr("bad snappy: %v", err)
	}
	return out, nil
}

// ReadBody reads at most maxBytes+1 bytes of r into buf, reporting a
// TooLargeError past maxBytes.
func ReadBody(r io.Reader, contentLength, maxBytes int64, buf []byte) ([]byte, error) {
	if contentLength > maxBytes {
		return nil, &TooLargeError{Size: contentLength, Limit: maxBytes}
	}
	buf = buf[:0]
	if contentLength > 0 && int64(cap(buf)) < contentLength {
		buf = make([]byte, 0, contentLength)
	}
	lr := io.LimitReader(r, maxBytes+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
	}
	if int64(len(buf)) > maxBytes {
		return nil, &TooLargeError{Size: int64(len(buf)), Limit: maxBytes}
	}
	return buf, nil
}

// Matchers converts remote read matchers to Prometheus matchers.
func Matchers(ms []*prompb.LabelMatcher) ([]*labels.Matcher, error) {
	out := make([]*labels.Matcher, 0, len(ms))
	for _, m := range ms {
		var t labels.MatchType
		switch m.Type {
		case prompb.LabelMatcher_EQ:
			t = labels.MatchEqual
		case prompb.LabelMatcher_NEQ:
			t = labels.MatchNotEqual
		case prompb.LabelMatcher_RE:
			t = labels.MatchRegexp
		case prompb.LabelMatcher_NRE:
			t = labels.MatchNotRegexp
		default:
			return nil, inputErr("unknown matcher type %d for label %q", m.Type, m.Name)
		}
		lm, err := labels.NewMatcher(t, m.Name, m.Value)
		if err != nil {
			return nil, inputErr("bad matcher %s%s%q: %v", m.Name, t, m.Value, err)
		}
		out = append(out, lm)
	}
	return out, nil
}

// EncodeReadResponse marshals and snappy-compresses a SAMPLES response.
func EncodeReadResponse(resp *prompb.ReadResponse) ([]byte, error) {
	raw, err := resp.Marshal()
	if err != nil {
		return nil, fmt.Errorf("marshal read response: %w", err)
	}
	return snappy.Encode(nil, raw), nil
}
