package hints

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/uber-go/tally/v4"
)

// clock is a settable time for age bounds.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func batchOf(k int) []storage.Sample {
	var out []storage.Sample
	for i := 0; i < 3; i++ {
		out = append(out, storage.Sample{ID: []byte(fmt.Sprintf("series-%d", i)), Shard: uint32(i), T: int64(1000 + k), V: float64(k*10 + i)})
	}
	return out
}

func openTest(t *testing.T, dir string, o Options) (*Store, *Queue) {
	t.Helper()
	if o.MaxBytes == 0 {
		o.MaxBytes = 1 << 30
	}
	if o.MaxAge == 0 {
		o.MaxAge = time.Hour
	}
	s, err := Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	q, err := s.Queue("node3")
	require.NoError(t, err)
	return s, q
}

// drain reads and acknowledges every record, returning the batch numbers
// (the T offset) in order and checking each record's samples.
func drain(t *testing.T, q *Queue) []int {
	t.Helper()
	var got []int
	for {
		rec, ok, err := q.Next()
		require.NoError(t, err)
		if !ok {
			return got
		}
		k := int(rec.Samples[0].T - 1000)
		require.Equal(t, "default", rec.Namespace)
		want := batchOf(k)
		require.Len(t, rec.Samples, len(want))
		for i := range want {
			require.Equal(t, string(want[i].ID), string(rec.Samples[i].ID))
			require.Equal(t, want[i].Shard, rec.Samples[i].Shard)
			require.Equal(t, want[i].T, rec.Samples[i].T)
			require.Equal(t, want[i].V, rec.Samples[i].V)
		}
		got = append(got, k)
		q.Ack(rec)
	}
}

func seq(a, b int) []int {
	var out []int
	for i := a; i < b; i++ {
		out = append(out, i)
	}
	return out
}

func TestQueueKeepsOrderAcrossSegmentsAndConcurrentAppends(t *testing.T) {
	_, q := openTest(t, t.TempDir(), Options{SegmentBytes: 256})
	for k := 0; k < 50; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	require.Greater(t, q.Status().Segments, 5, "small segments roll over")
	require.Equal(t, seq(0, 50), drain(t, q))
	st := q.Status()
	require.Zero(t, st.Records)
	require.Zero(t, st.Bytes)

	// Concurrent appenders share fsyncs; every record arrives once.
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				require.NoError(t, q.Append("default", batchOf(100+w*20+k)))
			}
		}(w)
	}
	wg.Wait()
	got := drain(t, q)
	sort.Ints(got)
	require.Equal(t, seq(100, 260), got)
}

func TestQueueSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, q := openTest(t, dir, Options{SegmentBytes: 300})
	for k := 0; k < 30; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	// Replay half, then restart: the rest comes back, in order. Records of
	// the segment being read may be replayed again (writes are
	// idempotent), never lost.
	for i := 0; i < 15; i++ {
		rec, ok, err := q.Next()
		require.NoError(t, err)
		require.True(t, ok)
		q.Ack(rec)
	}
	require.NoError(t, s.Close())
	s2, err := Open(dir, Options{MaxBytes: 1 << 30, MaxAge: time.Hour})
	require.NoError(t, err)
	defer s2.Close()
	require.Equal(t, []string{"node3"}, s2.Targets())
	q2, err := s2.Queue("node3")
	require.NoError(t, err)
	got := drain(t, q2)
	require.NotEmpty(t, got)
	require.LessOrEqual(t, got[0], 15)
	require.Equal(t, seq(got[0], 30), got)
	// New appends after the restart come after the old ones.
	require.NoError(t, q2.Append("default", batchOf(99)))
	require.Equal(t, []int{99}, drain(t, q2))
}

func TestQueueBoundedByBytesDropsOldest(t *testing.T) {
	sc := tally.NewTestScope("", nil)
	_, q := openTest(t, t.TempDir(), Options{MaxBytes: 2000, SegmentBytes: 400, Metrics: sc})
	for k := 0; k < 100; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
		require.LessOrEqual(t, q.Status().Bytes, int64(2000+400+200), "after append %d", k)
	}
	got := drain(t, q)
	require.Less(t, len(got), 100)
	require.Equal(t, seq(100-len(got), 100), got, "the newest survive, in order")
	dropped := counter(sc, "dropped", map[string]string{"target": "node3", "reason": DropBytes})
	require.Equal(t, int64(100-len(got)), dropped)
	require.Equal(t, dropped, q.Status().Dropped[DropBytes])
	require.Equal(t, int64(100), q.Status().Appended)
}

func TestQueueBoundedByAge(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	sc := tally.NewTestScope("", nil)
	_, q := openTest(t, t.TempDir(), Options{MaxAge: time.Hour, SegmentBytes: 300, Now: c.Now, Metrics: sc})
	for k := 0; k < 10; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	c.add(30 * time.Minute)
	for k := 10; k < 20; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	c.add(45 * time.Minute) // the first ten are 75 min old, the rest 45
	require.InDelta(t, 75*60, q.Status().OldestAgeSeconds, 1)
	require.Equal(t, seq(10, 20), drain(t, q))
	require.Equal(t, int64(10), counter(sc, "dropped", map[string]string{"target": "node3", "reason": DropAge}))
}

// segFiles lists the segment files of target node3 under dir.
func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "node3", "hints-*.log"))
	require.NoError(t, err)
	sort.Strings(m)
	return m
}

func TestQueueChecksumCorruptionCostsOneRecord(t *testing.T) {
	dir := t.TempDir()
	sc := tally.NewTestScope("", nil)
	s, q := openTest(t, dir, Options{Metrics: sc})
	var sizes []int64
	for k := 0; k < 5; k++ {
		before := q.Status().Bytes
		require.NoError(t, q.Append("default", batchOf(k)))
		sizes = append(sizes, q.Status().Bytes-before)
	}
	require.NoError(t, s.Close())
	files := segFiles(t, dir)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	// Flip a byte in the middle of record 2's payload.
	off := int64(segHeaderSize) + sizes[0] + sizes[1] + sizes[2]/2
	b[off] ^= 0xff
	require.NoError(t, os.WriteFile(files[0], b, 0o644))

	s2, err := Open(dir, Options{MaxBytes: 1 << 30, MaxAge: time.Hour, Metrics: sc})
	require.NoError(t, err)
	defer s2.Close()
	q2, err := s2.Queue("node3")
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 3, 4}, drain(t, q2))
	require.Equal(t, int64(1), counter(sc, "dropped", map[string]string{"target": "node3", "reason": DropCorrupt}))
}

func TestQueueTornTailIsIgnored(t *testing.T) {
	dir := t.TempDir()
	s, q := openTest(t, dir, Options{})
	for k := 0; k < 4; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	require.NoError(t, s.Close())
	files := segFiles(t, dir)
	info, err := os.Stat(files[0])
	require.NoError(t, err)
	// A crash half-way through the last record's write.
	require.NoError(t, os.Truncate(files[0], info.Size()-7))

	_, q2 := openTest(t, dir, Options{})
	require.Equal(t, 3, q2.Status().Records)
	require.NoError(t, q2.Append("default", batchOf(10)))
	require.Equal(t, []int{0, 1, 2, 10}, drain(t, q2))
}

func TestQueueBadHeaderAndGarbageNeverCrash(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "node3"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "node3", segName(1)), []byte("TSHQ garbage that is not a header at all"), 0o644))
	good := appendSegHeader(nil, 2)
	good = append(good, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4) // absurd length
	require.NoError(t, os.WriteFile(filepath.Join(dir, "node3", segName(2)), good, 0o644))
	_, q := openTest(t, dir, Options{})
	require.Empty(t, drain(t, q))
	require.NoError(t, q.Append("default", batchOf(1)))
	require.Equal(t, []int{1}, drain(t, q))
}

func TestQueueWriteFailureIsReportedAndLeavesNoGarbage(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewFaulty(vfs.OS())
	_, q := openTest(t, dir, Options{FS: fs})
	require.NoError(t, q.Append("default", batchOf(0)))
	fs.Set(func(op vfs.Op, _ string, n int) (bool, int) { return op == vfs.OpSync, 0 })
	require.ErrorIs(t, q.Append("default", batchOf(1)), vfs.ErrInjected)
	fs.Set(func(op vfs.Op, _ string, n int) (bool, int) { return op == vfs.OpWrite, n / 2 })
	require.ErrorIs(t, q.Append("default", batchOf(2)), vfs.ErrInjected)
	fs.Set(nil)
	require.NoError(t, q.Append("default", batchOf(3)))
	// The failed appends may or may not be there (a failed fsync), but
	// nothing corrupt is, and what succeeded is, in order.
	got := drain(t, q)
	require.Contains(t, got, 0)
	require.Contains(t, got, 3)
	require.NotContains(t, got, 2, "a short write is cut off")
	require.True(t, sort.IntsAreSorted(got), "in order: %v", got)
}

func TestQueueDropAllAndClose(t *testing.T) {
	sc := tally.NewTestScope("", nil)
	s, q := openTest(t, t.TempDir(), Options{Metrics: sc, SegmentBytes: 200})
	for k := 0; k < 10; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	q.DropAll(DropRemoved)
	require.Zero(t, q.Status().Records)
	require.Equal(t, int64(10), counter(sc, "dropped", map[string]string{"target": "node3", "reason": DropRemoved}))
	require.NoError(t, s.Close())
	require.ErrorIs(t, q.Append("default", batchOf(1)), ErrClosed)
	_, _, err := q.Next()
	require.ErrorIs(t, err, ErrClosed)
}

func TestOpenRefusesMissingBounds(t *testing.T) {
	_, err := Open(t.TempDir(), Options{MaxAge: time.Hour})
	require.ErrorContains(t, err, "MaxBytes")
	_, err = Open(t.TempDir(), Options{MaxBytes: 1})
	require.ErrorContains(t, err, "MaxAge")
}

func counter(sc tally.TestScope, name string, tags map[string]string) int64 {
	for _, c := range sc.Snapshot().Counters() {
		if c.Name() != name {
			continue
		}
		match := true
		for k, v := range tags {
			match = match && c.Tags()[k] == v
		}
		if match {
			return c.Value()
		}
	}
	return 0
}

func TestQueueNextBatchCoalescesInOrder(t *testing.T) {
	_, q := openTest(t, t.TempDir(), Options{})
	for k := 0; k < 10; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	require.NoError(t, q.Append("other", batchOf(10)))
	var got [][]int64
	for {
		rec, ok, err := q.NextBatch(10)
		require.NoError(t, err)
		if !ok {
			break
		}
		var ts []int64
		for i, s := range rec.Samples {
			if i%3 == 0 {
				ts = append(ts, s.T-1000)
			}
		}
		got = append(got, ts)
		q.Ack(rec)
	}
	// Three records of three samples fit in ten; another namespace starts
	// a new batch.
	require.Equal(t, [][]int64{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}, {10}}, got)
	require.Zero(t, q.Status().Records)
}

// A record whose segment the byte bound dropped while it was being
// replayed is not acknowledged against the next segment.
func TestQueueAckAfterDropIsIgnored(t *testing.T) {
	_, q := openTest(t, t.TempDir(), Options{MaxBytes: 600, SegmentBytes: 200})
	require.NoError(t, q.Append("default", batchOf(0)))
	rec, ok, err := q.Next()
	require.NoError(t, err)
	require.True(t, ok)
	for k := 1; k < 20; k++ {
		require.NoError(t, q.Append("default", batchOf(k)))
	}
	q.Ack(rec) // its segment is gone
	got := drain(t, q)
	require.NotEmpty(t, got)
	require.Equal(t, seq(got[0], 20), got)
	require.Greater(t, got[0], 0)
}

// frameStarts returns the offsets of the records of a version 2 segment,
// found by the marker the first one starts with.
func frameStarts(t *testing.T, b []byte) []int {
	t.Helper()
	marker := b[segHeaderSize : segHeaderSize+4]
	var out []int
	for off := segHeaderSize; ; {
		i := bytes.Index(b[off:], marker)
		if i < 0 {
			return out
		}
		out = append(out, off+i)
		off += i + 1
	}
}

// TestQueueLengthBitFlipCostsOneRecord: a bit flip in a record's length
// field costs that record only, whether the queue finds it when opening
// the segment or while reading the segment it is appending to.
func TestQueueLengthBitFlipCostsOneRecord(t *testing.T) {
	flip := func(t *testing.T, path string) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		starts := frameStarts(t, b)
		require.Len(t, starts, 5)
		b[starts[2]+4] ^= 0x04 // the length field's low byte
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}
	t.Run("reopened", func(t *testing.T) {
		dir := t.TempDir()
		s, q := openTest(t, dir, Options{})
		for k := 0; k < 5; k++ {
			require.NoError(t, q.Append("default", batchOf(k)))
		}
		require.NoError(t, s.Close())
		files, err := filepath.Glob(filepath.Join(dir, "node3", "hints-*.log"))
		require.NoError(t, err)
		require.Len(t, files, 1)
		flip(t, files[0])

		sc := tally.NewTestScope("", nil)
		_, q2 := openTest(t, dir, Options{Metrics: sc})
		require.Equal(t, 5, q2.Status().Records)
		require.Equal(t, []int{0, 1, 3, 4}, drain(t, q2))
		require.Equal(t, int64(1), counter(sc, "dropped", map[string]string{"target": "node3", "reason": DropCorrupt}))
		require.Zero(t, q2.Status().Records)
	})
	t.Run("live", func(t *testing.T) {
		dir := t.TempDir()
		sc := tally.NewTestScope("", nil)
		_, q := openTest(t, dir, Options{Metrics: sc})
		for k := 0; k < 5; k++ {
			require.NoError(t, q.Append("default", batchOf(k)))
		}
		files, err := filepath.Glob(filepath.Join(dir, "node3", "hints-*.log"))
		require.NoError(t, err)
		require.Len(t, files, 1)
		flip(t, files[0])
		require.NoError(t, q.Append("default", batchOf(5)))
		require.Equal(t, []int{0, 1, 3, 4, 5}, drain(t, q))
		require.Equal(t, int64(1), counter(sc, "dropped", map[string]string{"target": "node3", "reason": DropCorrupt}))
		require.Zero(t, q.Status().Records, "the skipped record is not left in the count")
	})
}

// TestQueueReadsVersion1Segments: segments an older build wrote (frames
// of length and CRC32-C of the payload) are still replayed.
func TestQueueReadsVersion1Segments(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "node3"), 0o755))
	b := commitlog.AppendFileHeader(nil, segMagic, 1, 7)
	for k := 0; k < 3; k++ {
		p := appendRecord(nil, time.Now(), "default", batchOf(k))[commitlog.FrameHeaderSize:]
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
		b = append(b, p...)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "node3", segName(7)), b, 0o644))
	_, q := openTest(t, dir, Options{})
	require.Equal(t, 3, q.Status().Records)
	require.NoError(t, q.Append("default", batchOf(3)))
	require.Equal(t, []int{0, 1, 2, 3}, drain(t, q))
}
