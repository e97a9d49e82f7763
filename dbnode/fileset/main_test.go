package fileset

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// genSeries returns n sorted series with payloads of random length in
// [0, maxSize) drawn from seed; IDs look like canonical label encodings.
func genSeries(n int, seed uint64, maxSize int) []Series {
	rng := rand.New(rand.NewPCG(seed, 42))
	out := make([]Series, n)
	for i := range out {
		size := 0
		if maxSize > 0 {
			size = rng.IntN(maxSize)
		}
		data := make([]byte, size)
		for j := range data {
			// Half random, half repetitive: compressible but not trivially.
			if j%2 == 0 {
				data[j] = byte(rng.Uint32())
			} else {
				data[j] = byte(j)
			}
		}
		out[i] = Series{
			ID:      fmt.Appendf(nil, "__name__\x00metric_%03d\x00instance\x00host-%07d", i%37, i),
			Data:    data,
			Samples: rng.IntN(720) + 1,
		}
	}
	sortSeries(out)
	return out
}

func sortSeries(s []Series) {
	slices.SortFunc(s, func(a, b Series) int { return bytes.Compare(a.ID, b.ID) })
}

func testID(blockStart int64, volume int) ID {
	return ID{Namespace: "default", Shard: 7, BlockStart: blockStart, Volume: volume}
}

const testBlockSize = int64(2 * 60 * 60 * 1000)

// writeTest writes a fileset and fails the test on error.
func writeTest(t testing.TB, fsys vfs.FS, root string, id ID, series []Series) {
	t.Helper()
	require.NoError(t, Write(fsys, root, id, testBlockSize, series))
}

func openTest(t testing.TB, fsys vfs.FS, root string, id ID) *Reader {
	t.Helper()
	r, err := OpenWith(fsys, root, id, OpenOptions{Cache: NewPageCache(1 << 20)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// flipByte xors one byte of a file at off (negative: from the end).
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x5a
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
