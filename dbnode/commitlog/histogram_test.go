package commitlog

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
)

// makeHists returns n histogram entries of series "<tag>-<i%series>",
// alternating integer and float histograms, the last a stale marker.
func makeHists(ns, tag string, n, series int, t0 int64) []HistEntry {
	out := make([]HistEntry, n)
	for i := range out {
		h := &histogram.Histogram{
			Schema: int32(i%3 - 1), ZeroThreshold: 0.001, ZeroCount: uint64(i), Count: uint64(2*i + 3), Sum: float64(i) * 0.25,
			PositiveSpans: []histogram.Span{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{int64(i + 1), 1},
			CounterResetHint: histogram.CounterResetHint(i % 4),
		}
		if i == n-1 {
			h.Sum = math.Float64frombits(value.StaleNaN)
		}
		e := HistEntry{Namespace: ns, ID: fmt.Appendf(nil, "%s-%d", tag, i%series), T: t0 + int64(i)}
		if i%2 == 0 {
			e.H = h
		} else {
			e.FH = h.ToFloat(nil)
		}
		out[i] = e
	}
	return out
}

func histRecs(hs []HistEntry) []rec {
	var out []rec
	for _, h := range hs {
		out = append(out, toHistRec(h))
	}
	return out
}

func writeWith(t *testing.T, l *Log, b []Entry, h []HistEntry) {
	t.Helper()
	tk, err := l.EnqueueWith(b, h)
	require.NoError(t, err)
	require.NoError(t, tk.Wait())
}

// Histogram samples replay exactly, beside the floats of their record,
// in sync and async mode, series shared by both types included.
func TestHistogramsReplay(t *testing.T) {
	for _, mode := range []Mode{ModeSync, ModeAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			l, _, err := Open(testOptions(Options{Dir: dir, Mode: mode}), nil)
			require.NoError(t, err)
			b1, h1 := makeBatch("default", "s", 6, 3, 0), makeHists("default", "s", 7, 3, 50)
			h2 := makeHists("other", "h", 4, 2, 100)
			b3 := makeBatch("default", "s", 3, 3, 200)
			writeWith(t, l, b1, h1)
			writeWith(t, l, nil, h2)
			writeWith(t, l, b3, nil)
			files := l.Files()
			require.NoError(t, l.Close())
			require.Empty(t, files)

			got, stats := reopen(t, testOptions(Options{Dir: dir}))
			want := append(append(append(toRecs(b1), histRecs(h1)...), histRecs(h2)...), toRecs(b3)...)
			require.Equal(t, want, got)
			require.False(t, stats.Damaged())
			require.Equal(t, len(want), stats.Entries)

			// The file's ranges count histogram timestamps too.
			l, _, err = Open(testOptions(Options{Dir: dir, ReplayHistogram: func(HistEntry) error { return nil }}), func(Entry) error { return nil })
			require.NoError(t, err)
			ranges := l.Files()[0].Ranges
			require.NoError(t, l.Close())
			require.Equal(t, TimeRange{Min: 100, Max: 103}, ranges["other"])
		})
	}
}

// A file holding histograms is refused, not half replayed, by a caller
// that gives no histogram replay.
func TestHistogramsNeedReplayCallback(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(testOptions(Options{Dir: dir}), nil)
	require.NoError(t, err)
	writeWith(t, l, nil, makeHists("default", "s", 2, 1, 0))
	require.NoError(t, l.Close())
	_, _, err = Open(testOptions(Options{Dir: dir}), func(Entry) error { return nil })
	require.ErrorContains(t, err, "histogram samples and no ReplayHistogram")
}

// A damaged histogram record costs that record only: the records before
// and after it replay, and the file is salvaged with them.
func TestDamagedHistogramRecord(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(testOptions(Options{Dir: dir}), nil)
	require.NoError(t, err)
	h1, h2, h3 := makeHists("default", "s", 5, 2, 0), makeHists("default", "s", 5, 3, 100), makeHists("default", "t", 5, 2, 200)
	for _, h := range [][]HistEntry{h1, h2, h3} {
		writeWith(t, l, nil, h)
	}
	require.NoError(t, l.Close())
	path := logFiles(t, dir)[0]
	offs, size := frames(t, path)
	require.Len(t, offs, 3)
	data := mustRead(t, path)
	// Flip a bit deep inside the second record's histogram bytes.
	data[offs[1]+(offs[2]-offs[1])*3/4] ^= 0x08
	require.NoError(t, os.WriteFile(path, data, 0o644))
	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	// Series s-2 is defined in the lost record only: h3 does not use it.
	require.Equal(t, append(histRecs(h1), histRecs(h3)...), got)
	require.Equal(t, 1, stats.CorruptFiles)
	require.Equal(t, offs[2]-offs[1], stats.SkippedBytes)
	require.Less(t, offs[2], size)
	require.FileExists(t, path+corruptSuffix)
	got, stats = reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, append(histRecs(h1), histRecs(h3)...), got)
	require.False(t, stats.Damaged())
}

// A version 2 file (written before histograms) still replays, and a
// damaged header over one is resolved by trying both record versions.
func TestVersion2FilesStillReplay(t *testing.T) {
	b1 := makeBatch("default", "s", 10, 5, 0)
	b2 := makeBatch("other", "t", 10, 5, 200)
	enc := newEncoder()
	enc.reset(1)
	file := binary.LittleEndian.AppendUint32([]byte(fileMagic), 2)
	file = binary.LittleEndian.AppendUint64(file, 1)
	file = binary.LittleEndian.AppendUint32(file, crc(file))
	for _, b := range [][]Entry{b1, b2} {
		v3 := enc.appendRecord(nil, b, nil)
		// Version 2 has no histogram section: drop its count (0).
		payload := v3[frameHeaderSize : len(v3)-1]
		start := len(file)
		file = OpenFrame(file)
		file = append(file, payload...)
		SealFrame(file, start, 1)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, fileName(1))
	require.NoError(t, os.WriteFile(path, file, 0o644))
	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b1, b2), got)
	require.False(t, stats.Damaged())

	file[1] ^= 0x01 // the magic: the version is unknown now
	require.NoError(t, os.WriteFile(path, file, 0o644))
	got, stats = reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b1, b2), got)
	require.Equal(t, 1, stats.CorruptFiles)
}
