package encoding

import (
	"testing"
)

// BenchmarkEncode appends the whole data set, reusing one encoder as a
// series buffer would.
func BenchmarkEncode(b *testing.B) {
	data := nodeExporterData()
	n := 0
	for _, s := range data {
		n += len(s.T)
	}
	e := NewEncoder()
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range data {
			e.Reset()
			for i, t := range s.T {
				if err := e.Append(t, s.V[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}

// encodedData returns the data set's streams and sealed blocks.
func encodedData(b *testing.B) (streams, sealed [][]byte, n int) {
	for _, s := range nodeExporterData() {
		e := NewEncoder()
		for i, t := range s.T {
			if err := e.Append(t, s.V[i]); err != nil {
				b.Fatal(err)
			}
		}
		sb, err := Seal(e.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		streams = append(streams, e.Bytes())
		sealed = append(sealed, sb)
		n += e.Len()
	}
	return streams, sealed, n
}

func benchDecode(b *testing.B, open func([]byte) Iterator, blocks [][]byte, n int) {
	b.ReportAllocs()
	var sink float64
	for b.Loop() {
		for _, blk := range blocks {
			it := open(blk)
			for it.Next() {
				_, v := it.At()
				sink += v
			}
			if it.Err() != nil {
				b.Fatal(it.Err())
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
	_ = sink
}

func BenchmarkDecode(b *testing.B) {
	streams, _, n := encodedData(b)
	benchDecode(b, NewIterator, streams, n)
}

func BenchmarkDecodeSealed(b *testing.B) {
	_, sealed, n := encodedData(b)
	benchDecode(b, NewSealedIterator, sealed, n)
}

func BenchmarkSeal(b *testing.B) {
	streams, _, n := encodedData(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range streams {
			if _, err := Seal(s); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}

// BenchmarkSize reports bytes per sample of every form on the full data
// set; the timing is meaningless. Run with -v for the per-kind table.
func BenchmarkSize(b *testing.B) {
	s := measure(b, nodeExporterData())
	for b.Loop() {
	}
	b.ReportMetric(s.per(s.stream), "B/sample-stream")
	b.ReportMetric(s.per(s.xor), "B/sample-xorchunk")
	b.ReportMetric(s.per(s.sealed), "B/sample-sealed")
	b.ReportMetric(s.per(s.pagedBetter), "B/sample-sealed-zstd-better")
	b.ReportMetric(s.per(s.pagedBest), "B/sample-sealed-zstd-best")
	b.Log(s.report())
}
