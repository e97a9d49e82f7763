package storage

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
)

// Reason classifies why a sample was refused. Refusals are permanent: the
// same sample will be refused again, so the HTTP layer answers 400.
type Reason int

const (
	ReasonTooOld       Reason = iota + 1 // older than retention
	ReasonTooFarFuture                   // newer than now+bufferFuture
	ReasonColdDisabled                   // older than bufferPast with cold writes off
	ReasonBadID                          // malformed series ID
	// ReasonSeriesLimit: the sample's series is new and the node holds
	// Options.MaxActiveSeries already. Unlike the others it may succeed
	// later (series go idle and leave memory, or the limit is raised).
	ReasonSeriesLimit
	// ReasonBadHistogram: a native histogram that Prometheus' validation
	// or the stream encoding refuses (spans and buckets disagree,
	// negative or inconsistent counts, an unknown reset hint).
	ReasonBadHistogram
	// ReasonTypeConflict: the series already holds a sample of the other
	// type (float or native histogram) at the sample's timestamp. A
	// series has one sample per timestamp: Prometheus' head refuses it
	// (storage.ErrDuplicateSampleForTimestamp), and a read could only
	// return one of the two.
	ReasonTypeConflict
)

func (r Reason) String() string {
	switch r {
	case ReasonTooOld:
		return "out_of_retention"
	case ReasonTooFarFuture:
		return "too_far_in_future"
	case ReasonColdDisabled:
		return "too_far_in_past"
	case ReasonBadID:
		return "bad_series_id"
	case ReasonSeriesLimit:
		return "series_limit"
	case ReasonBadHistogram:
		return "invalid_histogram"
	case ReasonTypeConflict:
		return "duplicate_sample_for_timestamp"
	}
	return "unknown"
}

// ErrUnknownNamespace is returned for a namespace not configured.
var ErrUnknownNamespace = errors.New("unknown namespace")

// The commit log's errors a write can return, under storage's name so
// the layers above classify a write's failure by storage's contract alone
// (errors.Is matches either name: they are the same values).
var (
	// ErrOverloaded: the commit log holds its most pending bytes; the
	// write was not taken and a retry soon may succeed (HTTP 503).
	ErrOverloaded = commitlog.ErrQueueFull
	// ErrClosed: storage is closing or closed (HTTP 503).
	ErrClosed = commitlog.ErrClosed
)

// SampleError is one refused sample.
type SampleError struct {
	Index  int // position in the batch
	Reason Reason
	Msg    string
}

// RejectedError reports the samples of a batch that were refused; the
// others were written. It is permanent (never retryable), except for the
// samples refused for ReasonSeriesLimit.
type RejectedError struct {
	Total    int
	ByReason map[Reason]int
	// Histograms is how many of Total are native histogram samples, so
	// that a batch of every kind can say how many of each were written.
	Histograms int
	// First few errors, for the message.
	Examples []SampleError
}

func (e *RejectedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples rejected", e.Total)
	for _, ex := range e.Examples {
		fmt.Fprintf(&b, "; %s", ex.Msg)
	}
	if e.Total > len(e.Examples) {
		b.WriteString("; ...")
	}
	return b.String()
}

func (e *RejectedError) add(se SampleError) {
	if e.ByReason == nil {
		e.ByReason = map[Reason]int{}
	}
	e.Total++
	e.ByReason[se.Reason]++
	if len(e.Examples) < 3 {
		e.Examples = append(e.Examples, se)
	}
}

func fmtAge(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

// fmtAgeMs formats later-earlier (unix ms, later >= earlier) without
// overflowing: the difference of two int64s can exceed int64, and a
// time.Duration holds only ±292 years.
func fmtAgeMs(later, earlier int64) string {
	d := uint64(later) - uint64(earlier) // exact for later >= earlier
	const maxMs = uint64(math.MaxInt64 / int64(time.Millisecond))
	if d > maxMs {
		return fmt.Sprintf("%d years", d/(365*24*3600*1000))
	}
	return fmtAge(time.Duration(d) * time.Millisecond)
}

// fmtMs formats a unix ms timestamp as RFC 3339 when it is within years
// 0-9999, else as the raw number (RFC 3339 has no form for it).
func fmtMs(t int64) string {
	const minMs, maxMs = -62167219200000, 253402300799999 // 0000-01-01, 9999-12-31T23:59:59.999
	if t < minMs || t > maxMs {
		return fmt.Sprintf("%d ms since 1970", t)
	}
	return time.UnixMilli(t).UTC().Format(time.RFC3339Nano)
}

// PartialError is returned by Query together with every series it could
// read when some matched series could not be read: their data is in a
// damaged fileset page (fileset.ErrCorrupt). The series returned beside it
// are complete; the damaged ones are left out and named here. A caller
// that does not look for it treats the query as failed, so nothing is
// silently answered as complete.
type PartialError struct {
	Damaged []DamagedSeries
}

// DamagedSeries is a series Query left out, and why.
type DamagedSeries struct {
	ID    []byte
	Shard uint32
	Err   error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%d series could not be read (damaged fileset data), first: %v", len(e.Damaged), e.Damaged[0].Err)
}

// Warnings describes the damage in a few lines, for a query's warnings.
func (e *PartialError) Warnings(max int) []string {
	out := make([]string, 0, min(len(e.Damaged), max)+1)
	for i, d := range e.Damaged {
		if i == max {
			out = append(out, fmt.Sprintf("%d more series left out of the result: their stored data is damaged", len(e.Damaged)-max))
			break
		}
		out = append(out, fmt.Sprintf("series %s left out of the result: %v", d.ID, d.Err))
	}
	return out
}
