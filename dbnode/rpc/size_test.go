package rpc

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// largeDB answers every read with n random-valued samples and counts
// written samples without storing them, so messages are large without a
// real database holding that much.
type largeDB struct {
	Database
	n       int
	written atomic.Int64
}

func (l *largeDB) WriteBatch(_ string, batch []storage.Sample) error {
	l.written.Add(int64(len(batch)))
	return nil
}

func (l *largeDB) Read(string, []byte, int64, int64) (encoding.Iterator, error) {
	e := encoding.NewEncoder()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < l.n; i++ {
		if err := e.Append(int64(i)*1000, r.Float64()); err != nil {
			return nil, err
		}
	}
	return encoding.NewIterator(e.Bytes()), nil
}

// TestLargeMessages sends messages beyond gRPC's 4 MiB default both ways.
func TestLargeMessages(t *testing.T) {
	db := &largeDB{Database: openStorage(t, commitlog.ModeAsync), n: 600_000} // ~4.5 MB stream
	// Sizes are under test, not speed: encoding and checking ~5 MiB each
	// way under -race on a loaded 2-core machine has taken longer than
	// the 10 s DefaultTimeout, so this client waits as long as it takes.
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{Timeout: 5 * time.Minute})
	ctx := context.Background()
	id := seriesID("big")

	samples := make([]Sample, 600_000) // ~5.4 MiB request
	for i := range samples {
		samples[i] = Sample{T: int64(i), V: float64(i) * 1.1}
	}
	req := &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, samples)}}
	require.Greater(t, len(appendPayload(nil, req.batch())), 4<<20)
	resp, err := writeReq(ctx, c, req)
	require.NoError(t, err)
	require.Equal(t, len(samples), resp.Written)
	require.EqualValues(t, len(samples), db.written.Load())

	fr, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, End: 1})
	require.NoError(t, err)
	require.Greater(t, proto.Size(fr.toPB()), 4<<20)
	require.Len(t, decodeStream(t, fr.Series[0].Stream), db.n)
}

func TestMessageSizeLimits(t *testing.T) {
	db := &largeDB{Database: openStorage(t, commitlog.ModeAsync), n: 10_000} // ~90 KB per series
	c := serve(t, db, nil, ServerOptions{MaxMsgSize: 64 << 10}, ClientOptions{MaxMsgSize: 1 << 20})
	ctx := context.Background()

	_, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{seriesID("a")}, End: 1})
	requireCode(t, err, codes.ResourceExhausted, "exceeds the 65536-byte message limit")

	// The server refuses a request above its limit before decoding it.
	req := &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(seriesID("a"), make([]Sample, 10_000))}}
	_, err = writeReq(ctx, c, req)
	requireCode(t, err, codes.ResourceExhausted, "")
	require.Zero(t, db.written.Load())

	// The client refuses to send above its own limit.
	small := serve(t, db, nil, ServerOptions{}, ClientOptions{MaxMsgSize: 1 << 10})
	_, err = writeReq(ctx, small, req)
	requireCode(t, err, codes.ResourceExhausted, "")
}
