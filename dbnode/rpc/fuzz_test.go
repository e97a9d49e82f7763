package rpc

import (
	"errors"
	"testing"
)

// fuzzDecode checks the decoder contract on arbitrary bytes: no panic, every
// error wraps ErrMalformed, and a message that decodes re-encodes to bytes
// that decode to the same message (the input itself may use non-minimal
// varints, so it need not equal its re-encoding).
func fuzzDecode(t *testing.T, b []byte, newMsg func() Message) {
	m := newMsg()
	err := m.Unmarshal(b)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error does not wrap ErrMalformed: %v", err)
		}
		return
	}
	if len(b) > 0 && m.Size() > 2*len(b)+16 {
		// Every element costs at least one input byte, and every varint
		// re-encodes to at most its input length, so the size is bounded.
		t.Fatalf("decoded %d bytes into a message of %d bytes", len(b), m.Size())
	}
	enc := m.MarshalAppend(nil)
	if len(enc) != m.Size() {
		t.Fatalf("Size %d, marshalled %d", m.Size(), len(enc))
	}
	again := newMsg()
	if err := again.Unmarshal(enc); err != nil {
		t.Fatalf("re-encoded message does not decode: %v", err)
	}
	if string(again.MarshalAppend(nil)) != string(enc) {
		t.Fatalf("re-encoding is not stable")
	}
}

func seeds(f *testing.F, ms ...Message) {
	for _, m := range ms {
		f.Add(m.MarshalAppend(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{wireVersion})
}

func FuzzWriteRequest(f *testing.F) {
	seeds(f,
		&WriteRequest{Namespace: "default", Series: []WriteSeries{{ID: []byte("a"), Shard: 3, Samples: []Sample{{1000, 1}, {1010, 2}}}, {ID: []byte("b"), Samples: []Sample{{999, 0.5}}}}},
		&WriteRequest{})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, b, func() Message { return &WriteRequest{} }) })
}

func FuzzWriteResponse(f *testing.F) {
	seeds(f, &WriteResponse{Written: 10, Rejected: 2, RejectMsg: "2 samples rejected"})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, b, func() Message { return &WriteResponse{} }) })
}

func FuzzFetchTaggedRequest(f *testing.F) {
	seeds(f, &FetchTaggedRequest{Namespace: "default", Matchers: []Matcher{{0, "__name__", "up"}, {2, "job", "a|b"}}, Start: -5, End: 1 << 40, Shards: []uint32{0, 17, 4095}})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, b, func() Message { return &FetchTaggedRequest{} }) })
}

func FuzzFetchRequest(f *testing.F) {
	seeds(f, &FetchRequest{Namespace: "default", IDs: [][]byte{[]byte("a"), nil, []byte("bc")}, Start: 1, End: 2})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, b, func() Message { return &FetchRequest{} }) })
}

func FuzzFetchResponse(f *testing.F) {
	seeds(f, &FetchResponse{Series: []FetchedSeries{{ID: []byte("a"), Shard: 1, Stream: []byte{1, 2, 3}}, {ID: []byte("b")}}})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, b, func() Message { return &FetchResponse{} }) })
}

func FuzzHealth(f *testing.F) {
	seeds(f, &HealthResponse{NodeID: "node1", Ready: true, Message: "ok"}, &HealthRequest{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecode(t, b, func() Message { return &HealthResponse{} })
		fuzzDecode(t, b, func() Message { return &HealthRequest{} })
	})
}

func FuzzBlockMetadata(f *testing.F) {
	seeds(f,
		&BlockMetadataRequest{Namespace: "default", Shards: []uint32{0, 17, 4095}},
		&BlockMetadataResponse{Shards: []ShardBlocks{{Shard: 3, Blocks: []BlockMeta{{BlockStart: 1 << 40, Volume: 2, Series: 10, Samples: 300, Digest: 1<<64 - 1}}}, {Shard: 4}}})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecode(t, b, func() Message { return &BlockMetadataRequest{} })
		fuzzDecode(t, b, func() Message { return &BlockMetadataResponse{} })
	})
}

func FuzzFetchBlock(f *testing.F) {
	seeds(f,
		&FetchBlockRequest{Namespace: "default", Shard: 5, BlockStart: -7200000, After: []byte("a"), MaxBytes: 1 << 22},
		&FetchBlockResponse{Series: []BlockSeries{{ID: []byte("a"), Data: []byte{1, 2, 3}, Samples: 3}, {ID: []byte("b")}}, More: true})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecode(t, b, func() Message { return &FetchBlockRequest{} })
		fuzzDecode(t, b, func() Message { return &FetchBlockResponse{} })
	})
}

func FuzzFetchUnflushed(f *testing.F) {
	seeds(f,
		&FetchUnflushedRequest{Namespace: "default", Shard: 5, After: []byte("a"), MaxBytes: 100},
		&FetchUnflushedResponse{Series: []FetchedSeries{{ID: []byte("a"), Shard: 1, Stream: []byte{1, 2, 3}}, {ID: []byte("b")}}, More: true})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecode(t, b, func() Message { return &FetchUnflushedRequest{} })
		fuzzDecode(t, b, func() Message { return &FetchUnflushedResponse{} })
	})
}
