package hints

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// FuzzDecodeRecord: any payload decodes or fails with an error, never a
// panic; a decoded record re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	rec := appendRecord(nil, time.UnixMilli(1234), "default", batchOf(3))
	f.Add(rec[commitlog.FrameHeaderSize:])
	f.Add([]byte{})
	f.Add(make([]byte, 11))
	hrec, err := appendHistogramRecord(nil, time.UnixMilli(1234), "default", histBatchOf(2))
	require.NoError(f, err)
	f.Add(hrec[commitlog.FrameHeaderSize:])
	brec, err := appendBatchRecord(nil, time.UnixMilli(1234), "default", storage.Batch{Floats: batchOf(2), Histograms: histBatchOf(2)})
	require.NoError(f, err)
	f.Add(brec[commitlog.FrameHeaderSize:])
	f.Fuzz(func(t *testing.T, p []byte) {
		r, _, err := decodeRecord(p, nil)
		if err != nil {
			return
		}
		if len(r.Histograms) > 0 {
			again, err := appendBatchRecord(nil, r.Created, r.Namespace, storage.Batch{Floats: r.Samples, Histograms: r.Histograms})
			if err != nil {
				return // a stream may decode to values its encoder refuses
			}
			r2, _, err := decodeRecord(again[commitlog.FrameHeaderSize:], nil)
			require.NoError(t, err)
			require.Equal(t, len(r.Histograms), len(r2.Histograms))
			require.Equal(t, len(r.Samples), len(r2.Samples))
			return
		}
		again := appendRecord(nil, r.Created, r.Namespace, r.Samples)
		if len(r.Samples) > 0 && string(again[commitlog.FrameHeaderSize:]) != string(p) {
			// Varints have several encodings; only check it decodes alike.
			r2, _, err := decodeRecord(again[commitlog.FrameHeaderSize:], nil)
			require.NoError(t, err)
			require.Equal(t, len(r.Samples), len(r2.Samples))
		}
	})
}

// FuzzSegment: a segment file with any bytes after a valid header opens
// and drains without a panic (TestQueueBadHeaderAndGarbageNeverCrash
// checks appends after garbage; fsyncs here would slow the fuzzer down).
func FuzzSegment(f *testing.F) {
	rec := appendRecord(nil, time.Now(), "default", batchOf(1))
	commitlog.SealFrame(rec, 0, 1)
	f.Add(rec)
	f.Add(append(append([]byte{}, rec...), rec[:5]...))
	f.Add([]byte{1, 0, 0, 0, 9, 9, 9, 9})
	hrec, err := appendHistogramRecord(nil, time.Now(), "default", histBatchOf(1))
	require.NoError(f, err)
	commitlog.SealFrame(hrec, 0, 1)
	f.Add(append(append([]byte{}, rec...), hrec...))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "node3"), 0o755))
		b := append(appendSegHeader(nil, 1), body...)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "node3", segName(1)), b, 0o644))
		s, err := Open(dir, Options{MaxBytes: 1 << 20, MaxAge: 1000 * time.Hour})
		require.NoError(t, err)
		defer s.Close()
		q, err := s.Queue("node3")
		require.NoError(t, err)
		for i := 0; i < 1000; i++ {
			rec, ok, err := q.Next()
			require.NoError(t, err)
			if !ok {
				break
			}
			q.Ack(rec)
		}
		require.Zero(t, q.Status().Records)
	})
}
