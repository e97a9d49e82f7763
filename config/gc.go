package config

import "fmt"

// GC sets how much room the Go collector leaves for garbage (package
// internal/gctune): Go's GOGC=Percent while live*Percent/100 is at most
// Headroom bytes, then Headroom bytes, but never under MinPercent of the
// live heap. A node's resident memory is its live heap plus that room, so
// this is the knob for memory per active series against collection CPU.
// A GOGC environment variable overrides it all.
type GC struct {
	// Percent is GOGC for a small heap. Default 100 (Go's).
	Percent int `yaml:"percent"`
	// MinPercent is the floor of GOGC for a large heap. Default 25.
	MinPercent int `yaml:"minPercent"`
	// Headroom is the most room for garbage, in bytes, above
	// MinPercent of the live heap. Default 256 MiB.
	Headroom int64 `yaml:"headroom" unit:"bytes"`
}

// defaults is called by Config.Defaults.
func (g *GC) defaults() {
	if g.Percent == 0 {
		g.Percent = 100
	}
	if g.MinPercent == 0 {
		g.MinPercent = 25
	}
	if g.Headroom == 0 {
		g.Headroom = 256 << 20
	}
}

func (g *GC) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if g.Percent < 1 {
		bad("gc.percent", "must be >= 1, got %d", g.Percent)
	}
	if g.MinPercent < 1 || g.MinPercent > g.Percent {
		bad("gc.minPercent", "must be between 1 and gc.percent (%d), got %d", g.Percent, g.MinPercent)
	}
	if g.Headroom < 0 {
		bad("gc.headroom", "must be >= 0 bytes, got %d", g.Headroom)
	}
	return errs
}
