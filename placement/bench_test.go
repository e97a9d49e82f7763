package placement

import (
	"fmt"
	"testing"

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
