package storage

import "errors"

// Batch is one write of samples of every kind: float samples and native
// histogram samples (integer or float). The write path carries it whole,
// from the HTTP handler through the session, hints and RPC to the
// storage entry point, which dispatches each series to its encoder: a
// write meets its level once, for all of its kinds. The next kind (rollup
// aggregates) is one more field here, not one more lane.
type Batch struct {
	Floats     []Sample
	Histograms []HistogramSample
}

// Len is the number of samples of every kind.
func (b Batch) Len() int { return len(b.Floats) + len(b.Histograms) }

// MergeRejected sums two writes' permanent rejections (either may be nil):
// the parts of one batch written separately report as one.
func MergeRejected(a, b *RejectedError) *RejectedError {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	m := &RejectedError{Total: a.Total + b.Total, Histograms: a.Histograms + b.Histograms}
	for _, r := range []*RejectedError{a, b} {
		for k, v := range r.ByReason {
			if m.ByReason == nil {
				m.ByReason = map[Reason]int{}
			}
			m.ByReason[k] += v
		}
		m.Examples = append(m.Examples, r.Examples...)
	}
	return m
}

// JoinWriteErrors is the outcome of one batch whose kinds were written
// separately, with errors a and b: a transient error of either wins (the
// writer retries the batch whole, rewriting is idempotent), and samples
// refused for good by both are reported as one *RejectedError.
func JoinWriteErrors(a, b error) error {
	var ar, br *RejectedError
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case !errors.As(a, &ar):
		return a
	case !errors.As(b, &br):
		return b
	}
	return MergeRejected(ar, br)
}
