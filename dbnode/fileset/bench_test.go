package fileset

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// benchSeries returns n sorted series of about size bytes. Compressible
// payloads are runs of 16-byte records drawn from a few shapes with one
// random byte each (about 3:1 for zstd); the others are random bytes, the
// worst case. Real sealed streams sit in between: see filesetbench.
func benchSeries(n, size int, compressible bool) ([]Series, int64) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	var shapes [8][16]byte
	for i := range shapes {
		for j := range shapes[i] {
			shapes[i][j] = byte(rng.Uint32())
		}
	}
	out := make([]Series, n)
	var total int64
	for i := range out {
		data := make([]byte, size-64+rng.IntN(128))
		if compressible {
			for j := 0; j < len(data); j += 16 {
				rec := shapes[rng.IntN(len(shapes))]
				rec[rng.IntN(16)] = byte(rng.Uint32())
				copy(data[j:], rec[:])
			}
		} else {
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
		}
		total += int64(len(data))
		out[i] = Series{
			ID:      fmt.Appendf(nil, "__name__\x00http_requests_total\x00instance\x00host-%07d\x00job\x00api", i),
			Data:    data,
			Samples: 720,
		}
	}
	sortSeries(out)
	return out, total
}

// BenchmarkWrite writes 10,000 series of ~1 KiB. MB/s counts payload bytes;
// disk/payload is the size on disk over the payload size.
func BenchmarkWrite(b *testing.B) {
	for _, compressible := range []bool{true, false} {
		b.Run(fmt.Sprintf("compressible=%v", compressible), func(b *testing.B) {
			series, payload := benchSeries(10_000, 1024, compressible)
			root := b.TempDir()
			b.SetBytes(payload)
			b.ReportAllocs()
			vol := 0
			for b.Loop() {
				require.NoError(b, Write(vfs.OS(), root, testID(0, vol), testBlockSize, series))
				vol++
			}
			b.StopTimer()
			r, err := Open(vfs.OS(), root, testID(0, 0))
			require.NoError(b, err)
			b.ReportMetric(float64(r.DiskSize())/float64(payload), "disk/payload")
			require.NoError(b, r.Close())
		})
	}
}

// BenchmarkRead reads random series of a 10,000 x ~1 KiB fileset, with the
// default page cache (hot: pages stay decompressed) and without one (cold:
// every read decompresses a 64 KiB page).
func BenchmarkRead(b *testing.B) {
	series, _ := benchSeries(10_000, 1024, true)
	root := b.TempDir()
	id := testID(0, 0)
	require.NoError(b, Write(vfs.OS(), root, id, testBlockSize, series))
	for _, tc := range []struct {
		name  string
		cache *PageCache
	}{{"cached", NewPageCache(DefaultPageCacheBytes)}, {"uncached", NewPageCache(0)}} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := OpenWith(vfs.OS(), root, id, OpenOptions{Cache: tc.cache})
			require.NoError(b, err)
			defer r.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				s := series[rng.IntN(len(series))]
				if _, ok, err := r.Read(s.ID); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

// BenchmarkRangeData scans the whole fileset, as peer streaming does.
func BenchmarkRangeData(b *testing.B) {
	series, payload := benchSeries(10_000, 1024, true)
	root := b.TempDir()
	id := testID(0, 0)
	require.NoError(b, Write(vfs.OS(), root, id, testBlockSize, series))
	r, err := Open(vfs.OS(), root, id)
	require.NoError(b, err)
	defer r.Close()
	b.SetBytes(payload)
	for b.Loop() {
		require.NoError(b, r.RangeData(func(_, _ []byte) error { return nil }))
	}
}

// BenchmarkOpen opens a 10,000-series fileset: checksum chain plus index
// decode.
func BenchmarkOpen(b *testing.B) {
	series, _ := benchSeries(10_000, 1024, true)
	root := b.TempDir()
	id := testID(0, 0)
	require.NoError(b, Write(vfs.OS(), root, id, testBlockSize, series))
	for b.Loop() {
		r, err := Open(vfs.OS(), root, id)
		require.NoError(b, err)
		require.NoError(b, r.Close())
	}
}
