package promapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// Exemplars is where /api/v1/query_exemplars reads: the exemplars in
// [start, end] (ms) of the series matching any matcher set, grouped by
// series, with warnings when part of the cluster did not answer
// (httpapi.API: this node's store, or the cluster through the session).
type Exemplars interface {
	QueryExemplars(ctx context.Context, start, end int64, matcherSets [][]*labels.Matcher) ([]exemplar.QueryResult, []string, error)
}

// queryExemplars answers /api/v1/query_exemplars as Prometheus does: the
// selectors of the PromQL expression in query pick the series; start and
// end default to the widest range.
func (a *API) queryExemplars(r *http.Request) result {
	start, end, aerr := rangeParams(r)
	if aerr != nil {
		return result{err: aerr}
	}
	if end.Before(start) {
		return result{err: badData(errors.New("end timestamp must not be before start timestamp"))}
	}
	if aerr := a.checkExpression(r.FormValue("query")); aerr != nil {
		return result{err: aerr}
	}
	expr, err := a.parser.ParseExpr(r.FormValue("query"))
	if err != nil {
		return result{err: badData(err)}
	}
	sels := parser.ExtractSelectors(expr)
	if len(sels) == 0 || a.opts.Exemplars == nil {
		return result{data: func(dst []byte) ([]byte, error) { return append(dst, "null"...), nil }}
	}
	res, warns, err := a.opts.Exemplars.QueryExemplars(r.Context(), timestamp.FromTime(start), timestamp.FromTime(end), sels)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return result{err: queryError(err)}
		}
		return result{err: &apiError{errorUnavailable, err}} // no node answered
	}
	var annots annotations.Annotations
	for _, w := range warns {
		annots.Add(errors.New(w))
	}
	return result{warnings: annots, data: func(dst []byte) ([]byte, error) { return appendExemplarResults(dst, res), nil }}
}

// appendExemplarResults writes results in Prometheus' shape:
// [{"seriesLabels":{...},"exemplars":[{"labels":{...},"value":"1","timestamp":1.5}]}].
func appendExemplarResults(dst []byte, res []exemplar.QueryResult) []byte {
	dst = append(dst, '[')
	for i, r := range res {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"seriesLabels":`...)
		dst = appendLabels(dst, r.SeriesLabels)
		dst = append(dst, `,"exemplars":[`...)
		for j, e := range r.Exemplars {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"labels":`...)
			dst = appendLabels(dst, e.Labels)
			dst = append(dst, `,"value":`...)
			dst = appendFloat(dst, e.Value)
			dst = append(dst, `,"timestamp":`...)
			dst = appendTimestamp(dst, e.Ts)
			dst = append(dst, '}')
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, ']')
}
