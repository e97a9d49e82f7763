package client

import (
	"context"
	"testing"
)

// BenchmarkSessionWriteHistograms: the coordinator's CPU per native
// histogram written at majority to three in-memory replicas (routing,
// the copy of IDs and histograms, the fan-out); the fakes keep what they
// get, so peers' costs are a slice append. 100 series x 2 samples.
func BenchmarkSessionWriteHistograms(b *testing.B) {
	c := newHistClusterB(b)
	o := c.options(c.steady, WriteMajority, true, nil)
	o.MaxBatch = 1000
	s, err := NewSession(o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	in := histogramsOf(100)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.WriteHistograms(ctx, "default", in); err != nil {
			b.Fatal(err)
		}
		if i%50 == 49 {
			b.StopTimer()
			for _, p := range c.peers {
				p.hmu.Lock()
				p.hists = p.hists[:0]
				p.hmu.Unlock()
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/histogram")
}
