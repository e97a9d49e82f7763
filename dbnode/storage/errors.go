package storage

import (
	"errors"
	"fmt"
	"strings"
	"time"
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
	}
	return "unknown"
}

// ErrUnknownNamespace is returned for a namespace not configured.
var ErrUnknownNamespace = errors.New("unknown namespace")

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
