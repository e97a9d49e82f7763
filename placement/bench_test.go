package placement

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkAddOneInstance adds one instance to a settled 4096-shard RF 3
// placement of 100 instances (the target: under 100 ms).
func BenchmarkAddOneInstance(b *testing.B) {
	for _, racksN := range []int{3, 10} {
		b.Run(fmt.Sprintf("racks=%d", racksN), func(b *testing.B) {
			var ins []Instance
			for i := range 100 {
				ins = append(ins, inst(fmt.Sprintf("i%03d", i), fmt.Sprintf("rack%d", i%racksN), 1))
			}
			p := MarkAllAvailable(mustInit(b, ins, 4096, 3))
			newcomer := inst("new", "rack1", 1)
			b.ResetTimer()
			for b.Loop() {
				next, err := Add(p, newcomer)
				require.NoError(b, err)
				_ = next
			}
		})
	}
}

// BenchmarkAddFourthNode is the three-node example's join (issue 30,
// item 4): 4096 shards, RF 3, one instance per rack, node4 joining rack1,
// so every shard node4 takes comes from node1. The CLI's add runs this
// once; on a loaded box its CPU is seconds of the join.
func BenchmarkAddFourthNode(b *testing.B) {
	p := MarkAllAvailable(mustInit(b, cluster(3, 3), 4096, 3))
	newcomer := inst("i003", "g0", 1)
	for b.Loop() {
		_, err := Add(p, newcomer)
		require.NoError(b, err)
	}
}

// BenchmarkMarkAvailableJoin marks the 2048 shards the fourth node of
// BenchmarkAddFourthNode bootstrapped available: the round's one CAS.
func BenchmarkMarkAvailableJoin(b *testing.B) {
	p := MarkAllAvailable(mustInit(b, cluster(3, 3), 4096, 3))
	p, err := Add(p, inst("i003", "g0", 1))
	require.NoError(b, err)
	in, _ := p.Instance("i003")
	shards := make([]uint32, 0, len(in.Shards))
	for _, s := range in.Shards {
		shards = append(shards, s.ID)
	}
	for b.Loop() {
		_, err := MarkAvailable(p, "i003", shards...)
		require.NoError(b, err)
	}
}

// BenchmarkInit builds a 4096-shard RF 3 placement of 100 instances.
func BenchmarkInit(b *testing.B) {
	ins := cluster(100, 10)
	for b.Loop() {
		_, err := Init(ins, 4096, 3)
		require.NoError(b, err)
	}
}

// BenchmarkRemoveOneInstance removes one instance from a settled 4096-shard
// RF 3 placement of 100 instances in 10 racks.
func BenchmarkRemoveOneInstance(b *testing.B) {
	p := MarkAllAvailable(mustInit(b, cluster(100, 10), 4096, 3))
	for b.Loop() {
		_, err := Remove(p, "i042")
		require.NoError(b, err)
	}
}

// joinedExample is the three-node example's placement while node4 joins:
// 14,336 copies, about 1 MB of JSON.
func joinedExample(b *testing.B) Placement {
	p := MarkAllAvailable(mustInit(b, cluster(3, 3), 4096, 3))
	p, err := Add(p, inst("i003", "g0", 1))
	require.NoError(b, err)
	return stamp(Placement{}, p, time.Unix(1_790_000_000, 0))
}

// BenchmarkEncodeJoined and BenchmarkDecodeJoined: every placement change
// is encoded once by its writer and decoded by every node's watch.
func BenchmarkEncodeJoined(b *testing.B) {
	p := joinedExample(b)
	var n int
	for b.Loop() {
		data, err := encodeStored(p)
		require.NoError(b, err)
		n = len(data)
	}
	b.ReportMetric(float64(n), "bytes")
}

func BenchmarkDecodeJoined(b *testing.B) {
	data, err := encodeStored(joinedExample(b))
	require.NoError(b, err)
	for b.Loop() {
		_, err := decodeStored(data, 7)
		require.NoError(b, err)
	}
}
