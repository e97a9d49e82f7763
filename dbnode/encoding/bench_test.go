package encoding

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process' user+system CPU time. The benchmarks report
// ns/sample from it as well as from wall time: on a shared, loaded machine
// wall time mostly measures the other tenants.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perSample reports wall and CPU nanoseconds per sample of a benchmark that
// handled samples samples per iteration; cpu0 is cpuTime() at its start.
func perSample(b *testing.B, samples int, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*samples), "cpu-ns/sample")
}

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
	cpu0 := cpuTime()
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
	perSample(b, n, cpu0)
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
	cpu0 := cpuTime()
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
	perSample(b, n, cpu0)
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
	var s Sealer
	var dst []byte
	cpu0 := cpuTime()
	for b.Loop() {
		for _, st := range streams {
			var err error
			if dst, err = s.Seal(dst[:0], st); err != nil {
				b.Fatal(err)
			}
		}
	}
	perSample(b, n, cpu0)
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
