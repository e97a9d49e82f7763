package filesetbench

import (
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/ident"
)

// BenchmarkBlockIndexSize writes one per-block volume of node_exporter
// series (real label sets: ~145 series a host, 24 samples each) spread
// over 4096 shards as the storage engine spreads them, and reports the
// bytes of the index and data files per series: what issue 18 compares
// with VictoriaMetrics' indexdb. The time is one volume write.
func BenchmarkBlockIndexSize(b *testing.B) {
	for _, hosts := range []int{70, 700} {
		cfg := nodeExporterConfig(hosts)
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			series, _ := sealed(b, cfg)
			byShard := map[uint32][]fileset.Series{}
			for _, s := range series {
				sh := ident.Shard(s.ID, ident.DefaultNumShards)
				byShard[sh] = append(byShard[sh], s) // stays sorted by ID
			}
			var shards []fileset.ShardSeries
			for sh, ss := range byShard {
				shards = append(shards, fileset.ShardSeries{Shard: sh, Series: ss})
			}
			sort.Slice(shards, func(i, j int) bool { return shards[i].Shard < shards[j].Shard })
			root := b.TempDir()
			vol := 0
			for b.Loop() {
				id := fileset.BlockID{Namespace: "default", BlockStart: 0, Volume: vol}
				require.NoError(b, fileset.WriteBlock(vfs.OS(), root, id, blockSize, shards))
				vol++
			}
			b.StopTimer()
			id := fileset.BlockID{Namespace: "default", BlockStart: 0, Volume: 0}
			size := func(kind string) float64 {
				st, err := os.Stat(fileset.BlockFilePath(root, id, kind))
				require.NoError(b, err)
				return float64(st.Size())
			}
			n := float64(len(series))
			b.ReportMetric(n, "series")
			b.ReportMetric(size("index")/n, "index-B/series")
			b.ReportMetric(size("data")/n, "data-B/series")
		})
	}
}

func nodeExporterConfig(hosts int) encodingtest.NodeExporterConfig {
	cfg := encodingtest.DefaultNodeExporter
	cfg.Hosts, cfg.Samples = hosts, 24
	return cfg
}

// sealed seals the node_exporter data set cfg into fileset series.
func sealed(tb testing.TB, cfg encodingtest.NodeExporterConfig) (series []fileset.Series, payload int64) {
	for _, s := range encodingtest.NodeExporter(cfg) {
		enc := encoding.NewEncoder()
		for i := range s.T {
			require.NoError(tb, enc.Append(s.T[i], s.V[i]))
		}
		b, err := encoding.Seal(enc.Bytes())
		require.NoError(tb, err)
		series = append(series, fileset.Series{ID: s.ID, Data: b, Samples: len(s.T)})
		payload += int64(len(b))
	}
	return series, payload
}
