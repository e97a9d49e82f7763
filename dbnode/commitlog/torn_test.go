package commitlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeLog writes each batch as one record into a fresh single file in
// dir and returns that file's path.
func writeLog(t testing.TB, dir string, batches ...[]Entry) string {
	t.Helper()
	l, _, err := Open(testOptions(Options{Dir: dir}), nil)
	require.NoError(t, err)
	for _, b := range batches {
		require.NoError(t, l.Write(b))
	}
	require.NoError(t, l.Close())
	files := logFiles(t, dir)
	require.Len(t, files, 1)
	return files[0]
}

func TestTornTailAtEveryOffset(t *testing.T) {
	root := t.TempDir()
	first := makeBatch("default", "s", 30, 10, 0)
	second := makeBatch("other", "s", 10, 10, 100)
	last := append(makeBatch("default", "s", 2, 10, 200), makeBatch("default", "new", 2, 2, 300)...)
	path := writeLog(t, filepath.Join(root, "orig"), first, second, last)
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	offs, size := frames(t, path)
	require.Len(t, offs, 3)
	lastStart := offs[2]
	want := toRecs(first, second)

	for cut := lastStart; cut < size; cut++ {
		dir := filepath.Join(root, "cut")
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		p := filepath.Join(dir, filepath.Base(path))
		require.NoError(t, os.WriteFile(p, orig[:cut], 0o644))

		got, stats := reopen(t, testOptions(Options{Dir: dir}))
		require.Equal(t, want, got, "cut at %d", cut)
		wantStats := ReplayStats{Files: 1, Entries: len(want)}
		if cut > lastStart {
			wantStats.CorruptTails, wantStats.TruncatedBytes = 1, cut-lastStart
		}
		require.Equal(t, wantStats, stats, "cut at %d", cut)
		info, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, lastStart, info.Size(), "the tail is truncated on disk")

		// A second open finds a clean file.
		_, stats = reopen(t, testOptions(Options{Dir: dir}))
		require.Zero(t, stats.CorruptTails)
	}
}

func TestCorruptRecord(t *testing.T) {
	b1 := makeBatch("default", "s", 10, 5, 0)
	b2 := makeBatch("default", "s", 10, 8, 100) // defines s-5..7
	b3 := makeBatch("default", "s", 10, 8, 200)
	b4 := makeBatch("other", "x", 5, 5, 300)
	// b3's entries of s-5..7 need b2's definitions: they are lost with it.
	var b3kept []Entry
	for _, e := range b3 {
		if s := string(e.ID); s != "s-5" && s != "s-6" && s != "s-7" {
			b3kept = append(b3kept, e)
		}
	}
	for _, tc := range []struct {
		name  string
		where func(recStart int64) int64 // offset of the flipped byte
	}{
		{"marker", func(s int64) int64 { return s + 1 }},
		{"length", func(s int64) int64 { return s + 5 }},
		{"checksum", func(s int64) int64 { return s + 9 }},
		{"payload", func(s int64) int64 { return s + frameHeaderSize + 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// First file: b1 b2 b3; the middle record gets corrupted.
			// Second file: b4, which must still be replayed.
			l, _, err := Open(testOptions(Options{Dir: dir}), nil)
			require.NoError(t, err)
			require.NoError(t, l.Write(b1))
			require.NoError(t, l.Write(b2))
			require.NoError(t, l.Write(b3))
			require.NoError(t, l.Rotate())
			require.NoError(t, l.Write(b4))
			require.NoError(t, l.Close())
			files := logFiles(t, dir)
			require.Len(t, files, 2)

			offs, _ := frames(t, files[0])
			data, err := os.ReadFile(files[0])
			require.NoError(t, err)
			data[tc.where(offs[1])] ^= 0x40
			require.NoError(t, os.WriteFile(files[0], data, 0o644))

			scope := newTestScope()
			got, stats := reopen(t, testOptions(Options{Dir: dir, Metrics: scope}))
			want := toRecs(b1, b3kept, b4)
			require.Equal(t, want, got)
			aside := files[0] + corruptSuffix
			require.Equal(t, ReplayStats{
				Files: 2, Entries: len(want),
				CorruptFiles: 1, SkippedBytes: offs[2] - offs[1], SkippedRecords: 1,
				UnresolvedEntries: len(b3) - len(b3kept),
				MovedAside:        []string{aside},
			}, stats)
			require.Equal(t, int64(1), counter(scope, "corrupt_files"))
			require.Equal(t, offs[2]-offs[1], counter(scope, "skipped_bytes"))
			require.Equal(t, int64(1), counter(scope, "skipped_records"))
			require.Equal(t, int64(3), counter(scope, "unresolved_entries"))
			require.Zero(t, counter(scope, "corrupt_tails"), "mid-file damage is not a torn tail")

			// The damaged bytes are kept for inspection, under a name
			// replay never reads.
			kept, err := os.ReadFile(aside)
			require.NoError(t, err)
			require.Equal(t, data, kept)

			// The rewritten file replays the same entries, cleanly.
			again, stats := reopen(t, testOptions(Options{Dir: dir}))
			require.Equal(t, want, again)
			require.False(t, stats.Damaged())
			require.Zero(t, stats.CorruptTails)
			require.FileExists(t, aside, "nothing removes the moved-aside copy")
		})
	}
}

func TestZeroFilledTail(t *testing.T) {
	dir := t.TempDir()
	b := makeBatch("default", "s", 10, 5, 0)
	path := writeLog(t, dir, b)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 4096)) // a file extended but never filled
	require.NoError(t, err)
	require.NoError(t, f.Close())

	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b), got)
	require.Equal(t, 1, stats.CorruptTails)
	require.Equal(t, int64(4096), stats.TruncatedBytes)
}

func TestBadHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []byte
	}{
		{"empty", nil},
		{"torn", appendHeader(nil, 7)[:10]},
		{"bad magic", append([]byte("XXXX"), appendHeader(nil, 7)[4:]...)},
		{"bad checksum", func() []byte { h := appendHeader(nil, 7); h[10] ^= 1; return h }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := makeBatch("default", "s", 4, 4, 0)
			writeLog(t, dir, b) // seq 1
			bad := filepath.Join(dir, fileName(7))
			require.NoError(t, os.WriteFile(bad, tc.header, 0o644))

			got, stats := reopen(t, testOptions(Options{Dir: dir}))
			require.Equal(t, toRecs(b), got)
			require.Equal(t, ReplayStats{Files: 2, Entries: len(b), CorruptTails: 1, TruncatedBytes: int64(len(tc.header))}, stats)
			require.NoFileExists(t, bad)
			// The file started after the bad one still gets a higher number.
			require.Equal(t, []string{filepath.Join(dir, fileName(1)), filepath.Join(dir, fileName(8))}, logFiles(t, dir))
		})
	}
}

func TestUnknownVersionFailsOpen(t *testing.T) {
	dir := t.TempDir()
	h := []byte(fileMagic)
	h = append(h, 99, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0) // version 99, seq 1
	h = append(h, 0, 0, 0, 0)
	sum := crc(h[:16])
	h[16], h[17], h[18], h[19] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
	require.NoError(t, os.WriteFile(filepath.Join(dir, fileName(1)), h, 0o644))
	_, _, err := Open(testOptions(Options{Dir: dir}), nil)
	require.ErrorContains(t, err, "unsupported commit log version 99")
	require.FileExists(t, filepath.Join(dir, fileName(1)), "a newer file is never truncated")
}
