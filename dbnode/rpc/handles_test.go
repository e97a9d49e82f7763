package rpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// wireRequest encodes samples as a SERIES_HANDLES request over t and
// unmarshals it back with proto, as a receiver's codec does.
func wireRequest(t *testing.T, ns string, samples []storage.Sample, tab *handleTable) *nodepb.WriteBatchRequest {
	t.Helper()
	w, err := encodeHandleRequest(ns, samples, tab, mem.DefaultBufferPool())
	require.NoError(t, err)
	defer w.free()
	var req nodepb.WriteBatchRequest
	require.NoError(t, proto.Unmarshal(w.bufs.Materialize(), &req))
	return &req
}

func handleTestBatch(refA storage.SeriesRef) []storage.Sample {
	a, b, c := seriesID("a"), seriesID("b", "k", "v"), seriesID("c")
	return []storage.Sample{
		{ID: a, Shard: shardOf(a), T: 1000, V: 1, Ref: refA}, {ID: a, Shard: shardOf(a), T: 1010, V: 2, Ref: refA},
		{ID: b, Shard: shardOf(b), T: 1001, V: 0.5},
		{ID: c, Shard: shardOf(c), T: -5, V: -0.0},
		{ID: b, Shard: shardOf(b), T: 1002, V: 7},
	}
}

// TestHandlePayloadRoundTrip: the first request of a stream carries each
// series' ID once, later ones only handles, and both decode to the batch
// sent, in order, with the series' IDs.
func TestHandlePayloadRoundTrip(t *testing.T) {
	refA := storage.SeriesRef(1<<32 | 1) // a ref: the handle table never resolves it
	batch := handleTestBatch(refA)
	tab, recv := newHandleTable(), &streamTable{}

	first := wireRequest(t, testNS, batch, tab)
	require.Equal(t, nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES, first.GetFormat())
	require.Equal(t, testNS, first.GetNamespace())
	got, hs, err := decodeHandlePayload(first.GetPayload(), testNS, recv, nil, nil)
	require.NoError(t, err)
	requireSamples(t, batch, got)
	require.Len(t, recv.series, 3, "a, b and c: b's second entry names its handle")
	require.Equal(t, []uint32{0, 0, 1, 2, 1}, hs)

	second := wireRequest(t, testNS, batch, tab)
	for _, s := range batch {
		require.False(t, bytes.Contains(second.GetPayload(), s.ID), "ID %q sent again", s.ID)
	}
	require.Less(t, len(second.GetPayload()), len(first.GetPayload()))
	got, _, err = decodeHandlePayload(second.GetPayload(), testNS, recv, nil, nil)
	require.NoError(t, err)
	requireSamples(t, batch, got)
	require.Len(t, recv.series, 3)

	// A resolved series hands its ref to the samples of its namespace only.
	ref := storage.SeriesRef(2<<32 | 2)
	recv.series[1].ns, recv.series[1].ref = testNS, ref
	got, _, err = decodeHandlePayload(second.GetPayload(), testNS, recv, nil, nil)
	require.NoError(t, err)
	require.Equal(t, ref, got[2].Ref)
	got, _, err = decodeHandlePayload(second.GetPayload(), "other", recv, nil, nil)
	require.NoError(t, err)
	require.Zero(t, got[2].Ref)
}

// TestHandlePayloadMalformed: a payload naming a handle the stream never
// defined, or defining one out of turn, or cut short, is refused with
// ErrMalformed naming the format, and decodes no sample.
func TestHandlePayloadMalformed(t *testing.T) {
	batch := handleTestBatch(0)
	good := wireRequest(t, testNS, batch, newHandleTable()).GetPayload()
	known := wireRequest(t, testNS, batch, func() *handleTable {
		tab := newHandleTable()
		wireRequest(t, testNS, batch, tab)
		return tab
	}()).GetPayload()

	cases := []struct {
		name string
		b    []byte
		msg  string
	}{
		{"handles never defined", known, "handle 0 not defined (0 are)"},
		{"truncated", good[:len(good)-4], "truncated"},
		{"trailing bytes", append(append([]byte{}, good...), 0), "1 trailing bytes"},
		{"defines handle 1 first", []byte{1, 1, 3, 1, 'a', 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "defines handle 1, the next is 0"},
		{"no samples", []byte{0, 1, 1}, "entries for 0 samples"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, hs, err := decodeHandlePayload(tc.b, testNS, &streamTable{}, nil, nil)
			require.ErrorIs(t, err, ErrMalformed)
			require.ErrorContains(t, err, "format PAYLOAD_FORMAT_SERIES_HANDLES")
			require.ErrorContains(t, err, tc.msg)
			require.Empty(t, got)
			require.Empty(t, hs)
		})
	}
}

// TestHandleTableFull: a sender's table reports full at the stream's
// handle limit, so the stream is replaced before the receiver would
// refuse a definition.
func TestHandleTableFull(t *testing.T) {
	tab := newHandleTable()
	tab.n = maxStreamHandles - 1
	require.False(t, tab.full())
	_, known := tab.handle(&storage.Sample{ID: []byte("x")})
	require.False(t, known)
	require.True(t, tab.full())
}

// FuzzHandlePayload checks the SERIES_HANDLES decoder on arbitrary bytes
// against a stream that defined two handles: no panic, every error wraps
// ErrMalformed and decodes nothing, the batch is no larger than the bytes
// allow, every sample's ID is its handle's, and only new handles are
// added, in order.
func FuzzHandlePayload(f *testing.F) {
	batch := handleTestBatch(0)
	tab := newHandleTable()
	f.Add(func() []byte {
		w, _ := encodeHandleRequest("", batch, tab, mem.DefaultBufferPool())
		var req nodepb.WriteBatchRequest
		_ = proto.Unmarshal(w.bufs.Materialize(), &req)
		return req.GetPayload()
	}())
	f.Add([]byte{1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recv := &streamTable{series: []streamSeries{{id: []byte("x"), shard: 1}, {id: []byte("y"), shard: 2}}}
		got, hs, err := decodeHandlePayload(b, testNS, recv, nil, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if len(got) != 0 || len(hs) != 0 {
				t.Fatalf("failed decode returned %d samples", len(got))
			}
			return
		}
		if len(got)*minSampleSize > len(b) {
			t.Fatalf("decoded %d samples from %d bytes", len(got), len(b))
		}
		if string(recv.series[0].id) != "x" || string(recv.series[1].id) != "y" {
			t.Fatalf("earlier handles changed")
		}
		for i := range got {
			if int(hs[i]) >= len(recv.series) || string(recv.series[hs[i]].id) != string(got[i].ID) || recv.series[hs[i]].shard != got[i].Shard {
				t.Fatalf("sample %d: handle %d does not match its ID", i, hs[i])
			}
		}
	})
}

// TestHandleTableByRef: samples carrying a storage ref are found by their
// series' number, samples without one by their ID, and each series keeps
// its handle across requests.
func TestHandleTableByRef(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	ids := idsInDistinctShards(3)
	now := samplesNearNow(1, 0)[0].T
	batch := make([]storage.Sample, len(ids))
	for i, id := range ids {
		batch[i] = storage.Sample{ID: id, Shard: shardOf(id), T: now, V: 1}
	}
	require.NoError(t, db.WriteBatch(testNS, batch))
	for i := range batch {
		require.NotZero(t, batch[i].Ref)
		require.NotZero(t, batch[i].Ref.Seq())
	}
	require.NotEqual(t, batch[0].Ref.Seq(), batch[1].Ref.Seq())

	tab := newHandleTable()
	for i := range batch {
		h, known := tab.handle(&batch[i])
		require.False(t, known)
		require.EqualValues(t, i, h)
	}
	for i := range batch {
		h, known := tab.handle(&batch[i])
		require.True(t, known)
		require.EqualValues(t, i, h)
	}
	require.Empty(t, tab.byRef)
	require.Empty(t, tab.byID)
	noRef := batch[1]
	noRef.Ref = 0
	h, known := tab.handle(&noRef)
	require.False(t, known, "found by ID, a table of its own")
	require.EqualValues(t, 3, h)
	h, known = tab.handle(&noRef)
	require.True(t, known)
	require.EqualValues(t, 3, h)
}
