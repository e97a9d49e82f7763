package filesetbench

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

const blockSize = 2 * 3600 * 1000

// sealedNodeExporter seals the encoding package's node_exporter data set
// (hosts x ~145 series x 720 samples) into fileset series.
func sealedNodeExporter(t testing.TB, hosts int) (series []fileset.Series, payload int64) {
	cfg := encodingtest.DefaultNodeExporter
	cfg.Hosts = hosts
	for _, s := range encodingtest.NodeExporter(cfg) {
		enc := encoding.NewEncoder()
		for i := range s.T {
			require.NoError(t, enc.Append(s.T[i], s.V[i]))
		}
		sealed, err := encoding.Seal(enc.Bytes())
		require.NoError(t, err)
		series = append(series, fileset.Series{ID: s.ID, Data: sealed, Samples: len(s.T)})
		payload += int64(len(sealed))
	}
	return series, payload
}

// BenchmarkWriteSealed writes a block of sealed node_exporter series and
// reports the bytes on disk over the payload bytes: what page compression
// adds on top of the encoding.
func BenchmarkWriteSealed(b *testing.B) {
	series, payload := sealedNodeExporter(b, 70) // ~10,000 series
	root := b.TempDir()
	b.SetBytes(payload)
	vol := 0
	for b.Loop() {
		id := fileset.ID{Namespace: "default", Shard: 1, Volume: vol}
		require.NoError(b, fileset.Write(vfs.OS(), root, id, blockSize, series))
		vol++
	}
	b.StopTimer()
	r, err := fileset.Open(vfs.OS(), root, fileset.ID{Namespace: "default", Shard: 1})
	require.NoError(b, err)
	defer r.Close()
	b.ReportMetric(float64(len(series)), "series")
	b.ReportMetric(float64(payload)/float64(len(series)), "payload-B/series")
	b.ReportMetric(float64(r.DiskSize())/float64(payload), "disk/payload")
	b.ReportMetric(float64(r.DiskSize())/float64(r.Samples()), "disk-B/sample")
}

// BenchmarkReadSealed reads random sealed series back, uncached.
func BenchmarkReadSealed(b *testing.B) {
	series, _ := sealedNodeExporter(b, 70)
	root := b.TempDir()
	id := fileset.ID{Namespace: "default", Shard: 1}
	require.NoError(b, fileset.Write(vfs.OS(), root, id, blockSize, series))
	r, err := fileset.OpenWith(vfs.OS(), root, id, fileset.OpenOptions{Cache: fileset.NewPageCache(0)})
	require.NoError(b, err)
	defer r.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		if _, ok, err := r.Read(series[rng.IntN(len(series))].ID); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func TestSealedRoundTrip(t *testing.T) {
	series, _ := sealedNodeExporter(t, 3)
	root := t.TempDir()
	id := fileset.ID{Namespace: "default", Shard: 1}
	require.NoError(t, fileset.Write(vfs.OS(), root, id, blockSize, series))
	r, err := fileset.Open(vfs.OS(), root, id)
	require.NoError(t, err)
	defer r.Close()
	for _, s := range series {
		got, ok, err := r.Read(s.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, s.Data, got)
	}
}
