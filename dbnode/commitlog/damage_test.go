package commitlog

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// damageModel is a commit log file written from known batches, with what
// replay must return for any damage to it: the entries of every record
// the damage does not touch, minus those of series whose definition was
// in a damaged record.
type damageModel struct {
	data    []byte
	seq     uint64
	starts  []int64 // record i spans [starts[i], ends[i])
	ends    []int64
	batches [][]Entry
	defIn   map[rec]int // first record using (ns, id): where it is defined; key has only NS, ID
}

func seriesKey(e Entry) rec { return rec{NS: e.Namespace, ID: string(e.ID)} }

// buildDamageModel writes n random batches over a few namespaces and a
// growing set of series (so later records keep defining new ones).
func buildDamageModel(t *testing.T, r *rand.Rand, n int) damageModel {
	dir := t.TempDir()
	m := damageModel{defIn: map[rec]int{}}
	tNext := int64(r.IntN(1000)) - 500
	for i := 0; i < n; i++ {
		size := 1 + r.IntN(40)
		b := make([]Entry, size)
		for j := range b {
			ns := []string{"default", "agg", "x"}[r.IntN(3)]
			b[j] = Entry{
				Namespace: ns,
				ID:        fmt.Appendf(nil, "series-%d", r.IntN(5+4*i)),
				T:         tNext,
				V:         r.NormFloat64(),
			}
			tNext += int64(r.IntN(3000)) - 1000
			if _, ok := m.defIn[seriesKey(b[j])]; !ok {
				m.defIn[seriesKey(b[j])] = i
			}
		}
		m.batches = append(m.batches, b)
	}
	path := writeLog(t, dir, m.batches...)
	var err error
	m.data, err = os.ReadFile(path)
	require.NoError(t, err)
	m.seq, _ = parseFileName(filepath.Base(path))
	m.starts, _ = frames(t, path)
	require.Len(t, m.starts, n)
	m.ends = append(m.starts[1:len(m.starts):len(m.starts)], int64(len(m.data)))
	return m
}

// want returns what replay must return when the records in lost are
// gone.
func (m damageModel) want(lost map[int]bool) []rec {
	var out []rec
	for i, b := range m.batches {
		if lost[i] {
			continue
		}
		for _, e := range b {
			if !lost[m.defIn[seriesKey(e)]] {
				out = append(out, toRec(e))
			}
		}
	}
	return out
}

// recordAt returns the record holding offset off, or -1 for the header.
func (m damageModel) recordAt(off int64) int {
	for i := range m.starts {
		if off >= m.starts[i] && off < m.ends[i] {
			return i
		}
	}
	return -1
}

// replayBytes writes data as the model's file into a fresh directory
// under root and replays it.
func (m damageModel) replayBytes(t *testing.T, root string, data []byte) ([]rec, ReplayStats, string) {
	t.Helper()
	dir := filepath.Join(root, "replay")
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, fileName(m.seq)), data, 0o644))
	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	return got, stats, dir
}

// TestBitFlipsLoseOnlyWhatTheyTouch is the replay property: flip random
// bits anywhere in a commit log file (header, frame headers, payloads),
// replay, and every entry of a record the flips did not touch comes back,
// except those whose series was defined in a touched record; nothing
// comes back that was not written, and the second replay (of the
// rewritten file) returns the same.
func TestBitFlipsLoseOnlyWhatTheyTouch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	root := t.TempDir()
	iters := 300
	if testing.Short() {
		iters = 50
	}
	for model := 0; model < 3; model++ {
		m := buildDamageModel(t, r, 20+r.IntN(40))
		for it := 0; it < iters/3; it++ {
			data := append([]byte(nil), m.data...)
			flips := 1 + r.IntN(3)
			lost := map[int]bool{}
			var offs []int64
			headerHit := false
			for range flips {
				off := r.Int64N(int64(len(data)))
				data[off] ^= 1 << r.IntN(8)
				offs = append(offs, off)
				if i := m.recordAt(off); i >= 0 {
					lost[i] = true
				} else {
					headerHit = true
				}
			}
			want := m.want(lost)
			got, stats, dir := m.replayBytes(t, root, data)
			require.Equal(t, want, got, "model %d iteration %d: flips at %v (records %v)", model, it, offs, lost)
			// Damage followed by an intact record is mid-file corruption;
			// damaged records at the very end are a torn tail.
			midFile, tail := headerHit, 0
			for i := len(m.batches) - 1; i >= 0 && lost[i]; i-- {
				tail++
			}
			if len(lost) > tail {
				midFile = true
			}
			require.Equal(t, midFile, stats.Damaged(), "flips at %v: %+v", offs, stats)
			require.Equal(t, tail > 0, stats.CorruptTails == 1, "flips at %v: %+v", offs, stats)
			again, stats2, _ := m.replayBytes(t, root+"/again", mustRead(t, filepath.Join(dir, fileName(m.seq))))
			require.Equal(t, want, again, "rewritten file, flips at %v", offs)
			require.False(t, stats2.Damaged())
			require.Zero(t, stats2.CorruptTails)
		}
	}
}

// TestTruncationLosesOnlyTheTail: a file cut at any offset replays every
// record that ends before the cut, as a torn tail, never as corruption.
func TestTruncationLosesOnlyTheTail(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	root := t.TempDir()
	m := buildDamageModel(t, r, 30)
	for it := 0; it < 100; it++ {
		cut := r.Int64N(int64(len(m.data)) + 1)
		lost := map[int]bool{}
		for i := range m.batches {
			if m.ends[i] > cut {
				lost[i] = true
			}
		}
		got, stats, _ := m.replayBytes(t, root, m.data[:cut])
		require.Equal(t, m.want(lost), got, "cut at %d", cut)
		require.False(t, stats.Damaged(), "a torn tail is not mid-file corruption (cut at %d)", cut)
		require.Equal(t, cut != int64(len(m.data)) && !slicesContain(m.ends, cut) || cut < headerSize, stats.CorruptTails == 1, "cut at %d: %+v", cut, stats)
	}
}

func slicesContain(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestVersion1FilesStillReplay: a file written by the previous format
// (no frame marker, checksum over the payload only) replays, and a
// damaged record in it is skipped by trying every offset.
func TestVersion1FilesStillReplay(t *testing.T) {
	b1 := makeBatch("default", "s", 10, 5, 0)
	b2 := makeBatch("default", "s", 10, 5, 100)
	b3 := makeBatch("other", "t", 10, 5, 200)
	enc := newEncoder()
	enc.reset(1)
	file := binary.LittleEndian.AppendUint32([]byte(fileMagic), 1)
	file = binary.LittleEndian.AppendUint64(file, 1)
	file = binary.LittleEndian.AppendUint32(file, crc(file))
	var starts []int
	for _, b := range [][]Entry{b1, b2, b3} {
		v3 := enc.appendRecord(nil, b, nil)
		// Versions 1 and 2 have no histogram section: drop its count (0).
		payload := v3[frameHeaderSize : len(v3)-1]
		starts = append(starts, len(file))
		file = binary.LittleEndian.AppendUint32(file, uint32(len(payload)))
		file = binary.LittleEndian.AppendUint32(file, crc(payload))
		file = append(file, payload...)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, fileName(1))
	require.NoError(t, os.WriteFile(path, file, 0o644))
	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b1, b2, b3), got)
	require.False(t, stats.Damaged())

	// Damage the middle record's payload: the other two come back.
	file[starts[1]+frameHeaderSizeV1+2] ^= 0x10
	require.NoError(t, os.WriteFile(path, file, 0o644))
	got, stats = reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b1, b3), got)
	require.Equal(t, 1, stats.CorruptFiles)
	require.Equal(t, int64(starts[2]-starts[1]), stats.SkippedBytes)
	// The rewritten file is of the current version.
	h := mustRead(t, path)[:headerSize]
	_, v, err := parseHeader(h)
	require.NoError(t, err)
	require.Equal(t, uint32(fileVersion), v)
}

// TestDamagedHeaderKeepsRecords: a bit flip in the file header does not
// cost the records after it.
func TestDamagedHeaderKeepsRecords(t *testing.T) {
	dir := t.TempDir()
	b1 := makeBatch("default", "s", 10, 5, 0)
	b2 := makeBatch("default", "s", 10, 7, 100)
	path := writeLog(t, dir, b1, b2)
	data := mustRead(t, path)
	data[2] ^= 0x01 // the magic
	require.NoError(t, os.WriteFile(path, data, 0o644))
	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b1, b2), got)
	require.Equal(t, 1, stats.CorruptFiles)
	require.Equal(t, int64(headerSize), stats.SkippedBytes)
	require.Zero(t, stats.SkippedRecords)
	require.FileExists(t, path+corruptSuffix)
}
