package client

import (
	"testing"
	"time"
)

// BenchmarkWriteExemplarsHandoff is what a remote write with exemplars
// pays on its request path in a cluster: copying 100 exemplars' series
// IDs and queueing them (delivery runs on the session's workers, to three
// in-memory owners). One op is one request's hand-off.
func BenchmarkWriteExemplarsHandoff(b *testing.B) {
	c, _, dial := auxCluster(b)
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: ReadUnstrictMajority, WriteLevel: WriteMajority,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 10 * time.Second, MaxBatch: 1000, Dial: dial,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	items := testExemplars(100)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.WriteExemplars(items)
	}
}
