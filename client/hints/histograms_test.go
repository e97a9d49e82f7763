package hints

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

func histBatchOf(k int) []storage.HistogramSample {
	var out []storage.HistogramSample
	for i := 0; i < 2; i++ {
		s := storage.HistogramSample{ID: []byte(fmt.Sprintf("hist-%d", i)), Shard: uint32(i), T: int64(1000 + k)}
		h := &histogram.Histogram{Count: uint64(k + i + 1), Sum: float64(k), PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{int64(k + i + 1)}}
		if i == 1 {
			s.FH = h.ToFloat(nil)
		} else {
			s.H = h
		}
		out = append(out, s)
	}
	return out
}

// appendHistogramRecord writes a histogram record (kind 1) as builds
// before batch records did: their hint files must still replay.
func appendHistogramRecord(dst []byte, created time.Time, ns string, samples []storage.HistogramSample) ([]byte, error) {
	dst = commitlog.OpenFrame(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(created.UnixMilli())|kindFlag)
	dst = append(dst, kindHistograms)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	dst = append(dst, ns...)
	return rpc.AppendHistograms(dst, samples)
}

func requireHistograms(t *testing.T, want, got []storage.HistogramSample) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, string(want[i].ID), string(got[i].ID))
		require.Equal(t, want[i].Shard, got[i].Shard)
		require.Equal(t, want[i].T, got[i].T)
		if want[i].H != nil {
			require.True(t, want[i].H.Equals(got[i].H), "%v", got[i])
		} else {
			require.True(t, want[i].FH.Equals(got[i].FH), "%v", got[i])
		}
	}
}

// A batch of every kind is one record: float-only batches keep the float
// record every build reads, batches with histograms are batch records.
// They share a queue in write order, survive a restart, coalesce with
// each other up to maxSamples (a replay sends both kinds of one stretch
// of records) and carry every histogram field.
func TestQueueBatchRecords(t *testing.T) {
	dir := t.TempDir()
	s, q := openTest(t, dir, Options{})
	require.NoError(t, q.Append("default", batchOf(0)))
	require.NoError(t, q.AppendBatch("default", storage.Batch{Histograms: histBatchOf(1)}))
	require.NoError(t, q.AppendBatch("default", storage.Batch{Floats: batchOf(2), Histograms: histBatchOf(2)}))
	require.NoError(t, q.Append("default", batchOf(3)))
	require.Error(t, q.AppendBatch("default", storage.Batch{Histograms: []storage.HistogramSample{{ID: []byte("x"), T: 1}}}), "neither kind of histogram")
	require.Equal(t, 4, q.Status().Records)
	require.NoError(t, s.Close())

	s2, err := Open(dir, Options{MaxBytes: 1 << 30, MaxAge: time.Hour})
	require.NoError(t, err)
	defer s2.Close()
	q2, err := s2.Queue("node3")
	require.NoError(t, err)
	rec, ok, err := q2.NextBatch(1000)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 4, rec.frames)
	var wantF []storage.Sample
	for _, k := range []int{0, 2, 3} {
		wantF = append(wantF, batchOf(k)...)
	}
	require.Len(t, rec.Samples, len(wantF))
	for i := range wantF {
		require.Equal(t, string(wantF[i].ID), string(rec.Samples[i].ID))
		require.Equal(t, wantF[i].T, rec.Samples[i].T)
	}
	requireHistograms(t, append(histBatchOf(1), histBatchOf(2)...), rec.Histograms)
	q2.Ack(rec)
	require.Zero(t, q2.Status().Records)
}

// Histogram records written by builds before batch records (kind 1) are
// read and replayed as before, beside float and batch records.
func TestQueueReadsHistogramRecordsOfEarlierBuilds(t *testing.T) {
	dir := t.TempDir()
	s, q := openTest(t, dir, Options{})
	require.NoError(t, q.append(func(b []byte, now time.Time) ([]byte, error) {
		return appendHistogramRecord(b, now, "default", histBatchOf(1))
	}))
	require.NoError(t, q.AppendBatch("default", storage.Batch{Floats: batchOf(2), Histograms: histBatchOf(2)}))
	require.NoError(t, s.Close())
	_, q2 := openTest(t, dir, Options{})
	rec, ok, err := q2.Next()
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, rec.Samples)
	requireHistograms(t, histBatchOf(1), rec.Histograms)
	q2.Ack(rec)
	rec, ok, err = q2.Next()
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, rec.Samples, len(batchOf(2)))
	requireHistograms(t, histBatchOf(2), rec.Histograms)
}

// A record of a kind this build does not know (a newer build wrote it)
// costs that record only.
func TestQueueUnknownRecordKindCostsOneRecord(t *testing.T) {
	rec, err := appendBatchRecord(nil, time.UnixMilli(5), "default", storage.Batch{Histograms: histBatchOf(1)})
	require.NoError(t, err)
	p := rec[commitlog.FrameHeaderSize:]
	p[8] = 9
	_, _, err = decodeRecord(p, nil)
	require.ErrorContains(t, err, "unknown kind 9")
}

// A segment holding only histogram records reopens with its records and
// their true age: the kind flag is no part of the created time.
func TestQueueHistogramOnlySegmentSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, q := openTest(t, dir, Options{})
	require.NoError(t, q.AppendBatch("default", storage.Batch{Histograms: histBatchOf(1)}))
	require.NoError(t, s.Close())
	_, q2 := openTest(t, dir, Options{})
	st := q2.Status()
	require.Equal(t, 1, st.Records)
	require.Less(t, st.OldestAgeSeconds, 3600.0)
	rec, ok, err := q2.Next()
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, rec.Histograms, 2)
}
