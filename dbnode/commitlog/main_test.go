package commitlog

import (
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/uber-go/tally/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// Re-executed by TestCrashAcknowledgedWritesSurvive: be the child.
		os.Exit(crashChild(os.Getenv(crashChildEnv)))
	}
	goleak.VerifyTestMain(m)
}

// rec is an Entry with the ID as a string, comparable with ==.
type rec struct {
	NS, ID string
	T      int64
	V      uint64 // float bits, so NaN compares exactly
	H      string // a histogram sample: every field, printed
}

func toHistRec(e HistEntry) rec {
	r := rec{NS: e.Namespace, ID: string(e.ID), T: e.T}
	if e.H != nil {
		r.H = fmt.Sprintf("%+v", *e.H)
	} else {
		r.H = fmt.Sprintf("float %+v", *e.FH)
	}
	return r
}

func toRec(e Entry) rec {
	return rec{NS: e.Namespace, ID: string(e.ID), T: e.T, V: math.Float64bits(e.V)}
}

func toRecs(batches ...[]Entry) []rec {
	var out []rec
	for _, b := range batches {
		for _, e := range b {
			out = append(out, toRec(e))
		}
	}
	return out
}

// makeBatch returns n entries of series "<tag>-<i%series>" in ns,
// timestamps from t0.
func makeBatch(ns, tag string, n, series int, t0 int64) []Entry {
	b := make([]Entry, n)
	for i := range b {
		b[i] = Entry{
			Namespace: ns,
			ID:        fmt.Appendf(nil, "%s-%d", tag, i%series),
			T:         t0 + int64(i),
			V:         float64(i) * 1.5,
		}
	}
	return b
}

// reopen opens dir, collecting what replay returns, and closes the log
// again.
func reopen(t testing.TB, opts Options) ([]rec, ReplayStats) {
	t.Helper()
	var got []rec
	if opts.ReplayHistogram == nil {
		opts.ReplayHistogram = func(e HistEntry) error {
			got = append(got, toHistRec(e))
			return nil
		}
	}
	l, stats, err := Open(opts, func(e Entry) error {
		got = append(got, toRec(e))
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return got, stats
}

// frames returns the start offset of every record in the file.
func frames(t testing.TB, path string) (offsets []int64, size int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	off := int64(headerSize)
	for off+frameHeaderSize <= int64(len(b)) {
		offsets = append(offsets, off)
		require.Equal(t, frameMarker, string(b[off:off+4]), "frame marker at %d", off)
		n := int64(b[off+4]) | int64(b[off+5])<<8 | int64(b[off+6])<<16 | int64(b[off+7])<<24
		off += frameHeaderSize + n
	}
	require.Equal(t, int64(len(b)), off, "file %s does not end on a record boundary", path)
	return offsets, int64(len(b))
}

// logFiles lists the commit log files in dir, oldest first.
func logFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, filePrefix+"*"+fileSuffix))
	require.NoError(t, err)
	return m // zero-padded names sort numerically
}

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func newTestScope() tally.TestScope { return tally.NewTestScope("", nil) }

func counter(s tally.TestScope, name string) int64 {
	c, ok := s.Snapshot().Counters()[name+"+"]
	if !ok {
		return 0
	}
	return c.Value()
}

// testOptions is o with the sizes and interval the node fills from its
// config's commitlog section taken from config.Default() where o leaves
// them zero: the default values are written once, in config.Defaults.
func testOptions(o Options) Options {
	d := config.Default().CommitLog
	if o.FlushEvery == 0 {
		o.FlushEvery = d.FlushEvery
	}
	if o.MaxFileSize == 0 {
		o.MaxFileSize = d.MaxFileSize
	}
	if o.MaxPending == 0 {
		o.MaxPending = d.MaxPendingBytes
	}
	return o
}
