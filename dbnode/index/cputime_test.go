package index

import (
	"syscall"
	"testing"
	"time"
)

// The build machine is shared and often oversubscribed, which inflates
// wall-clock ns/op several-fold. cpuClock measures the process's CPU time
// (user+system) across a benchmark so the report has a number that does not
// count time spent descheduled. It includes GC work, which is fair.
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{start: processCPU()} }

// report adds cpu-ns/op for n operations.
func (c cpuClock) report(b *testing.B, n int) {
	b.ReportMetric(float64(processCPU()-c.start)/float64(n), "cpu-ns/op")
}
