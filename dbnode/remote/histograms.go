package remote

import (
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// Histogram is one native histogram sample of a decoded request: the index
// of its series in the decoder's Series, its timestamp and the histogram,
// integer (H) or float (FH). They live beside Series rather than in it, so
// the Series of the float path, thousands per request, stay small.
type Histogram struct {
	Series int
	T      int64
	H      *histogram.Histogram
	FH     *histogram.FloatHistogram
}

// Histograms are rare next to floats and carry nested repeated fields, so
// they are decoded with Prometheus' generated types (a few allocations per
// histogram) rather than by hand; the float path is untouched.

func decodeHistogramV1(b []byte, series int) (Histogram, error) {
	var p prompb.Histogram
	return decodeHistogram(&p, b, series, func() int32 { return int32(p.ResetHint) })
}

func decodeHistogramV2(b []byte, series int) (Histogram, error) {
	var p writev2.Histogram
	return decodeHistogram(&p, b, series, func() int32 { return int32(p.ResetHint) })
}

// wireHistogram is what the v1 and v2 generated histogram messages share:
// they differ only in their package (and the type of their reset hint,
// which hint reads once p is decoded).
type wireHistogram interface {
	Unmarshal([]byte) error
	GetTimestamp() int64
	IsFloatHistogram() bool
	ToIntHistogram() *histogram.Histogram
	ToFloatHistogram() *histogram.FloatHistogram
}

// decodeHistogram decodes b into p and converts it, for either protocol.
func decodeHistogram(p wireHistogram, b []byte, series int, hint func() int32) (Histogram, error) {
	if err := p.Unmarshal(b); err != nil {
		return Histogram{}, err
	}
	h := Histogram{Series: series, T: p.GetTimestamp()}
	if p.IsFloatHistogram() {
		h.FH = p.ToFloatHistogram()
	} else {
		h.H = p.ToIntHistogram()
	}
	return h, checkHint(hint())
}

// checkHint refuses a reset hint the protocol does not define (Prometheus
// would store it as is; a hint is one of four values everywhere else).
func checkHint(h int32) error {
	if h < 0 || h > int32(histogram.GaugeType) {
		return fmt.Errorf("unknown reset_hint %d", h)
	}
	return nil
}
