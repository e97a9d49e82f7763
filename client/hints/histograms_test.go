package hints

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
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

// Histogram records and float records share a queue in write order,
// survive a restart, are never coalesced with each other (a replay
// sends one kind per write) and carry every histogram field.
func TestQueueHistogramRecords(t *testing.T) {
	dir := t.TempDir()
	s, q := openTest(t, dir, Options{})
	require.NoError(t, q.Append("default", batchOf(0)))
	require.NoError(t, q.AppendHistograms("default", histBatchOf(1)))
	require.NoError(t, q.AppendHistograms("default", histBatchOf(2)))
	require.NoError(t, q.Append("default", batchOf(3)))
	require.Error(t, q.AppendHistograms("default", []storage.HistogramSample{{ID: []byte("x"), T: 1}}), "neither kind of histogram")
	require.NoError(t, s.Close())

	s2, err := Open(dir, Options{MaxBytes: 1 << 30, MaxAge: time.Hour})
	require.NoError(t, err)
	defer s2.Close()
	q2, err := s2.Queue("node3")
	require.NoError(t, err)
	var kinds []string
	for {
		rec, ok, err := q2.NextBatch(1000)
		require.NoError(t, err)
		if !ok {
			break
		}
		switch {
		case len(rec.Histograms) > 0:
			require.Empty(t, rec.Samples)
			want := append(histBatchOf(1), histBatchOf(2)...)
			require.Len(t, rec.Histograms, len(want))
			for i := range want {
				require.Equal(t, string(want[i].ID), string(rec.Histograms[i].ID))
				require.Equal(t, want[i].Shard, rec.Histograms[i].Shard)
				require.Equal(t, want[i].T, rec.Histograms[i].T)
				if want[i].H != nil {
					require.True(t, want[i].H.Equals(rec.Histograms[i].H), "%v", rec.Histograms[i])
				} else {
					require.True(t, want[i].FH.Equals(rec.Histograms[i].FH), "%v", rec.Histograms[i])
				}
			}
			kinds = append(kinds, "histograms")
		default:
			kinds = append(kinds, fmt.Sprintf("floats %d", rec.Samples[0].T-1000))
		}
		q2.Ack(rec)
	}
	require.Equal(t, []string{"floats 0", "histograms", "floats 3"}, kinds)
	require.Zero(t, q2.Status().Records)
}

// A record of a kind this build does not know (a newer build wrote it)
// costs that record only.
func TestQueueUnknownRecordKindCostsOneRecord(t *testing.T) {
	rec, err := appendHistogramRecord(nil, time.UnixMilli(5), "default", histBatchOf(1))
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
	require.NoError(t, q.AppendHistograms("default", histBatchOf(1)))
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
