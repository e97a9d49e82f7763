package encoding

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
)

// pageSize is the fileset's page: sealed payloads of consecutive series are
// concatenated until the next one would overflow it, and each page is
// compressed on its own.
const pageSize = 64 << 10

var (
	datasetOnce sync.Once
	dataset     []encodingtest.Series
)

// nodeExporterData is the benchmark data set, generated once per process.
func nodeExporterData() []encodingtest.Series {
	datasetOnce.Do(func() { dataset = encodingtest.NodeExporter(encodingtest.DefaultNodeExporter) })
	return dataset
}

// sizes measures every form of a data set.
type sizes struct {
	samples, series        int
	stream, xor, sealed    int
	pagedBetter, pagedBest int // sealed, paged, zstd
	streamPagedBest        int // stream bytes, paged, zstd best: Gorilla bits alone
	sealedSeriesBest       int // sealed, each series compressed alone
	perKind                map[string]*kindSize
}

type kindSize struct{ series, samples, stream, xor, sealed int }

func (s sizes) per(n int) float64 { return float64(n) / float64(s.samples) }

func measure(t testing.TB, data []encodingtest.Series) sizes {
	s := sizes{perKind: map[string]*kindSize{}}
	var sealedAll, streamAll [][]byte
	for _, ser := range data {
		e := NewEncoder()
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		require.NoError(t, err)
		for i, ts := range ser.T {
			require.NoError(t, e.Append(ts, ser.V[i]))
			app.Append(0, ts, ser.V[i])
		}
		sealed, err := Seal(e.Bytes())
		require.NoError(t, err)
		sealedAll = append(sealedAll, sealed)
		streamAll = append(streamAll, e.Bytes())
		k := s.perKind[ser.Kind]
		if k == nil {
			k = &kindSize{}
			s.perKind[ser.Kind] = k
		}
		k.series++
		k.samples += len(ser.T)
		k.stream += len(e.Bytes())
		k.xor += len(c.Bytes())
		k.sealed += len(sealed)
		s.series++
		s.samples += len(ser.T)
		s.stream += len(e.Bytes())
		s.xor += len(c.Bytes())
		s.sealed += len(sealed)
	}
	better, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	require.NoError(t, err)
	best, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	require.NoError(t, err)
	s.pagedBetter = pagedZstd(better, sealedAll)
	s.pagedBest = pagedZstd(best, sealedAll)
	s.streamPagedBest = pagedZstd(best, streamAll)
	for _, p := range sealedAll {
		s.sealedSeriesBest += len(best.EncodeAll(p, nil))
	}
	return s
}

// pagedZstd returns the compressed size of payloads as the fileset writer
// stores them: concatenated into pages of about pageSize, each page
// compressed independently.
func pagedZstd(enc *zstd.Encoder, payloads [][]byte) int {
	var page, dst []byte
	total := 0
	flush := func() {
		if len(page) > 0 {
			dst = enc.EncodeAll(page, dst[:0])
			total += len(dst)
			page = page[:0]
		}
	}
	for _, p := range payloads {
		if len(page) > 0 && len(page)+len(p) > pageSize {
			flush()
		}
		page = append(page, p...)
	}
	flush()
	return total
}

func (s sizes) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d series, %d samples; bytes/sample:\n", s.series, s.samples)
	fmt.Fprintf(&b, "  stream %.3f, chunkenc XOR %.3f, sealed %.3f\n", s.per(s.stream), s.per(s.xor), s.per(s.sealed))
	fmt.Fprintf(&b, "  sealed+zstd paged: better %.3f, best %.3f; each series alone (best) %.3f\n",
		s.per(s.pagedBetter), s.per(s.pagedBest), s.per(s.sealedSeriesBest))
	fmt.Fprintf(&b, "  stream+zstd paged (best), for comparison: %.3f\n", s.per(s.streamPagedBest))
	var kinds []string
	for k := range s.perKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "  %-13s %6s %7s %7s %7s\n", "kind", "series", "stream", "xor", "sealed")
	for _, name := range kinds {
		k := s.perKind[name]
		n := float64(k.samples)
		fmt.Fprintf(&b, "  %-13s %6d %7.3f %7.3f %7.3f\n", name, k.series,
			float64(k.stream)/n, float64(k.xor)/n, float64(k.sealed)/n)
	}
	return b.String()
}

// TestCompressionTargets holds the encoding to its targets on a smaller
// cut of the benchmark data set (BenchmarkSize reports the full one): the
// stream no larger than Prometheus' XOR chunks, sealed and paged zstd at
// most 1.3 bytes per sample.
func TestCompressionTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses a generated data set")
	}
	cfg := encodingtest.DefaultNodeExporter
	cfg.Hosts = 6
	s := measure(t, encodingtest.NodeExporter(cfg))
	t.Log(s.report())
	require.LessOrEqual(t, s.stream, s.xor)
	require.LessOrEqual(t, s.per(s.pagedBetter), 1.3)
	require.LessOrEqual(t, s.per(s.sealedSeriesBest), 1.3)
}
