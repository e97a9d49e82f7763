package rpc

import (
	"errors"
	"testing"

	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// FuzzWritePayload checks the payload decoder's contract on arbitrary
// bytes: no panic, every error wraps ErrMalformed, the decoded batch is no
// larger than the payload allows, and a payload that decodes re-encodes to
// bytes that decode to the same samples (the input may use non-minimal
// varints or split a series' run into several entries, so it need not
// equal its re-encoding).
func FuzzWritePayload(f *testing.F) {
	f.Add(appendPayload(nil, []storage.Sample{
		{ID: []byte("a"), Shard: 3, T: 1000, V: 1}, {ID: []byte("a"), Shard: 3, T: 1010, V: 2},
		{ID: []byte("b"), T: 999, V: 0.5},
	}))
	f.Add(appendPayload(nil, nil))
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodePayload(b, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if len(got) != 0 {
				t.Fatalf("failed decode returned %d samples", len(got))
			}
			return
		}
		if len(got)*minSampleSize > len(b) {
			t.Fatalf("decoded %d samples from %d bytes", len(got), len(b))
		}
		enc := appendPayload(nil, got)
		if n, _ := payloadLen(got); n != len(enc) {
			t.Fatalf("payloadLen %d, encoded %d bytes", n, len(enc))
		}
		again, err := decodePayload(enc, nil)
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		requireSamples(t, got, again)
		if string(appendPayload(nil, again)) != string(enc) {
			t.Fatalf("re-encoding is not stable")
		}
	})
}
