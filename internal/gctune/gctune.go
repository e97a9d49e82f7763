// Package gctune sets the Go collector's percentage (GOGC) from the live
// heap after each collection, so that a node holding many series does
// not keep as much room for garbage as it holds data.
//
// With a fixed GOGC the heap grows to live*(1+GOGC/100) before a
// collection, and the runtime keeps those pages: at Go's default of 100 a
// node's resident memory is about twice its live heap, and with a million
// active series the live heap is most of the process. A lower fixed GOGC
// would cost every node CPU, most of all a small one, whose collections
// are cheap but would come twice as often. So the room for garbage is
// Go's default (live*Percent/100) up to Headroom bytes, and beyond that
// it shrinks towards live*MinPercent/100: a small heap collects exactly as
// with GOGC=100, a large one keeps a bounded amount of garbage room.
// (VictoriaMetrics runs with GOGC=30 throughout for the same reason.)
//
// The environment wins: with GOGC set, nothing is tuned.
package gctune

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Config is the rule. The zero value is not valid: use Defaults.
type Config struct {
	// Percent is GOGC while live*Percent/100 <= Headroom.
	Percent int
	// MinPercent is the floor for a large heap.
	MinPercent int
	// Headroom is the most garbage room, in bytes, a heap is given above
	// live*MinPercent/100.
	Headroom int64
}

// Defaults: Go's 100 for a heap up to 256 MiB, then 256 MiB of room, and
// never less than a quarter of the live heap.
func Defaults() Config { return Config{Percent: 100, MinPercent: 25, Headroom: 256 << 20} }

// PercentFor is the GOGC the rule gives a live heap of live bytes.
func (c Config) PercentFor(live int64) int {
	if live <= 0 {
		return c.Percent
	}
	p := c.Percent
	if live/100*int64(c.Percent) > c.Headroom {
		p = int(c.Headroom * 100 / live)
	}
	return max(p, c.MinPercent, 1)
}

// Tuner applies a Config after every collection.
type Tuner struct {
	cfg     Config
	samples []metrics.Sample
	cycles  uint64
	percent int // last set; 0: none yet
}

// New returns a tuner, or nil when GOGC is set in the environment (the
// operator chose).
func New(cfg Config) *Tuner {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	return &Tuner{cfg: cfg, samples: []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
	}}
}

// Tune applies the rule if a collection finished since the last call. It
// returns the GOGC in force (0 when nothing was set yet).
func (t *Tuner) Tune() int {
	metrics.Read(t.samples)
	if t.samples[0].Value.Kind() != metrics.KindUint64 || t.samples[1].Value.Kind() != metrics.KindUint64 {
		return t.percent // a runtime without these metrics: leave GOGC alone
	}
	cycles, live := t.samples[0].Value.Uint64(), t.samples[1].Value.Uint64()
	if cycles == t.cycles || cycles == 0 {
		return t.percent
	}
	t.cycles = cycles
	// Changing GOGC stops the world briefly: only on a real change.
	if p := t.cfg.PercentFor(int64(live)); p != t.percent && (t.percent == 0 || abs(p-t.percent) >= 2) {
		debug.SetGCPercent(p)
		t.percent = p
	}
	return t.percent
}

// Run tunes every interval (a collection of a large heap takes longer
// than that) until ctx ends, then restores GOGC to Percent.
func (t *Tuner) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		t.Tune()
		select {
		case <-ctx.Done():
			if t.percent != 0 {
				debug.SetGCPercent(t.cfg.Percent)
			}
			return
		case <-tick.C:
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
