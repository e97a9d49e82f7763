package rpc

import "github.com/tessera-tsdb/tessera/dbnode/encoding"

// Matcher is a label matcher on the wire; Type is a labels.MatchType
// (0 =, 1 !=, 2 =~, 3 !~).
type Matcher struct {
	Type  uint8
	Name  string
	Value string
}

// FetchTaggedRequest asks for the series of Namespace matching all Matchers
// with samples in [Start, End] (unix ms, inclusive).
type FetchTaggedRequest struct {
	Namespace string
	Matchers  []Matcher
	Start     int64
	End       int64
	// Shards restricts the answer to these shards, each of which the node
	// must be allowed to read. Empty means every shard the node may read.
	Shards []uint32
	// AcceptHistograms: the requester reads FetchedSeries.Histograms.
	// Without it a node refuses (FailedPrecondition) to answer a series
	// holding native histograms rather than drop them: an older requester
	// would not see the field.
	AcceptHistograms bool
	// RollupWindows: Namespace is a rollup namespace and the requester
	// reads FetchedSeries.Rollup, each series' windows ending in [Start,
	// End]. A node older than the field answers Stream samples and no
	// Rollup instead; the requester refuses that answer.
	RollupWindows bool
}

// FetchRequest asks for the samples of the given series IDs in [Start,
// End] (unix ms, inclusive).
type FetchRequest struct {
	Namespace string
	IDs       [][]byte
	Start     int64
	End       int64
	// AcceptHistograms as in FetchTaggedRequest.
	AcceptHistograms bool
}

// FetchedSeries is one series of a fetch: its samples in the range as an
// encoding stream (encoding.NewIterator reads it; empty means no samples).
type FetchedSeries struct {
	ID     []byte
	Shard  uint32
	Stream []byte
	// Histograms are the native histogram samples in the range: histogram
	// streams in time order (encoding.NewHistogramIterator reads each).
	Histograms [][]byte
	// Rollup (RollupWindows only) is the series' windows as one rollup
	// payload (rollup.AppendPayload), halves cut by block edges merged.
	Rollup []byte
}

// HistogramIterator returns an iterator over s.Histograms, nil when the
// series has none.
func (s *FetchedSeries) HistogramIterator() encoding.HistogramIterator {
	if len(s.Histograms) == 0 {
		return nil
	}
	its := make([]encoding.HistogramIterator, len(s.Histograms))
	for i, h := range s.Histograms {
		its[i] = encoding.NewHistogramIterator(h)
	}
	return encoding.MergeHistogramIterators(its...)
}

// FetchResponse answers both fetches. For FetchRequest it holds one series
// per requested ID, in request order; for FetchTaggedRequest one per
// matching series with samples in the range, in no particular order.
type FetchResponse struct {
	Series []FetchedSeries
}
