package config

import (
	"fmt"
	"time"
)

// Repair configures background anti-entropy repair (package repair): per
// shard this node owns AVAILABLE and per block, a digest is compared with
// the other AVAILABLE owners; differing series are pulled, merged and
// indexed.
type Repair struct {
	// Enabled runs the repair loop. Default true.
	Enabled *bool `yaml:"enabled"`
	// CompareOnly compares and reports differences without pulling or
	// writing anything. Default false.
	CompareOnly bool `yaml:"compareOnly"`
	// Every is the time from the start of one pass over every owned shard
	// to the start of the next. Default 1h.
	Every time.Duration `yaml:"every"`
	// MaxBytesPerSecond paces the bytes a pass receives from peers
	// (digests, checksums and pulled series). 0 = unlimited. Default 8 MiB.
	MaxBytesPerSecond int64 `yaml:"maxBytesPerSecond" unit:"bytes"`
	// SettleMargin: only samples older than now - bufferPast - SettleMargin
	// are compared, so writes still on their way to replicas do not look
	// like differences. Default 1m.
	SettleMargin time.Duration `yaml:"settleMargin"`
	// SeriesPerFetch is how many differing series one Fetch pulls.
	// Default 256.
	SeriesPerFetch int `yaml:"seriesPerFetch"`
}

// RepairEnabled reports the effective switch.
func (r Repair) RepairEnabled() bool { return r.Enabled == nil || *r.Enabled }

// defaults is called by Config.Defaults.
func (r *Repair) defaults() {
	if r.Every == 0 {
		r.Every = time.Hour
	}
	if r.MaxBytesPerSecond == 0 {
		r.MaxBytesPerSecond = 8 << 20
	}
	if r.SettleMargin == 0 {
		r.SettleMargin = time.Minute
	}
	if r.SeriesPerFetch == 0 {
		r.SeriesPerFetch = 256
	}
}

// validate is called by Config.Validate.
func (r *Repair) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if r.Every <= 0 {
		bad("repair.every", "must be > 0, got %v", r.Every)
	}
	if r.MaxBytesPerSecond < 0 {
		bad("repair.maxBytesPerSecond", "must be >= 0, got %d", r.MaxBytesPerSecond)
	}
	if r.SettleMargin < 0 {
		bad("repair.settleMargin", "must be >= 0, got %v", r.SettleMargin)
	}
	if r.SeriesPerFetch <= 0 {
		bad("repair.seriesPerFetch", "must be > 0, got %d", r.SeriesPerFetch)
	}
	return errs
}
