// Package limits holds the node's input limits (label sizes, labels per
// series, series and samples per request, active series, query series,
// length and lookback) and the one series-label validation that both write
// paths call: HTTP remote write on the labels it decodes, the node RPC
// server on the IDs a peer sends. A client reaching either port is refused
// the same series, with the same message.
//
// Every refusal is an *Error naming the limit by its config field
// ("limits.maxLabelValueLength") and the offending value or series, with
// the HTTP status to answer (400 for what can never succeed, 429 where a
// retry may, 422 for a query over a query limit), and is counted in
// tessera_limits_refused_total{limit="<field>"}.
package limits

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tessera-tsdb/tessera/ident"
	"github.com/uber-go/tally/v4"
)

// The limits, named by their config field: these names appear in refusal
// messages and as the limit tag of the refused counter.
const (
	LabelNameLength       = "limits.maxLabelNameLength"
	LabelValueLength      = "limits.maxLabelValueLength"
	LabelNamesPerSeries   = "limits.maxLabelNamesPerSeries"
	SeriesPerRequest      = "limits.maxSeriesPerRequest"
	SamplesPerRequest     = "limits.maxSamplesPerRequest"
	ActiveSeries          = "limits.maxActiveSeries"
	FetchedSeriesPerQuery = "limits.maxFetchedSeriesPerQuery"
	QueryLength           = "limits.maxQueryLength"
	QueryLookback         = "limits.maxQueryLookback"
	SeriesPerFetch        = "limits.maxSeriesPerFetch"
	MetadataLength        = "limits.maxMetadataLength"
	QuerySamples          = "query.maxSamples" // enforced by the PromQL engine
	// The size and nesting of a PromQL expression, checked by promapi
	// before the engine parses it (the parser's cost grows with both).
	QueryExpressionBytes = "query.maxExpressionBytes"
	QueryExpressionDepth = "query.maxExpressionDepth"
)

// MaxRepresentable is the longest label name or value the Prometheus
// label set (and so the PromQL engine and the query API) can hold: its
// encoding stores a string's length in 3 bytes. Longer strings cannot be
// read back through PromQL, so the label length limits may not exceed it.
const MaxRepresentable = ident.MaxLabelLength

var all = []string{LabelNameLength, LabelValueLength, LabelNamesPerSeries, SeriesPerRequest,
	SamplesPerRequest, ActiveSeries, FetchedSeriesPerQuery, QueryLength, QueryLookback,
	SeriesPerFetch, MetadataLength}

// Config is the limits' values; zero or negative means no limit. It has
// the fields of config.Limits, so config.Limits converts to it.
type Config struct {
	MaxLabelNameLength       int
	MaxLabelValueLength      int
	MaxLabelNamesPerSeries   int
	MaxSeriesPerRequest      int
	MaxSamplesPerRequest     int
	MaxActiveSeries          int
	MaxFetchedSeriesPerQuery int
	MaxQueryLength           time.Duration
	MaxQueryLookback         time.Duration
	MaxSeriesPerFetch        int
	MaxMetadataLength        int
}

// Error is a refusal. Limit is the config field of the limit refused
// ("" for Prometheus' label rules, which are no limit), Status the HTTP
// status that answers it.
type Error struct {
	Limit  string
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Limits applies a Config and counts its refusals. A nil *Limits applies
// no limit but still Prometheus' label rules. Safe for concurrent use.
type Limits struct {
	cfg     Config
	refused map[string]tally.Counter
}

// New returns the limits of cfg, counting refusals in scope (the node
// passes its "limits" sub-scope: tessera_limits_refused_total{limit=...}).
func New(cfg Config, scope tally.Scope) *Limits {
	if scope == nil {
		scope = tally.NoopScope
	}
	l := &Limits{cfg: cfg, refused: make(map[string]tally.Counter, len(all)+3)}
	for _, name := range append(all, QuerySamples, QueryExpressionBytes, QueryExpressionDepth) {
		l.refused[name] = scope.Tagged(map[string]string{"limit": name}).Counter("refused")
	}
	return l
}

// Config returns the values applied (the zero Config for nil).
func (l *Limits) Config() Config {
	if l == nil {
		return Config{}
	}
	return l.cfg
}

// Refuse counts one refusal of limit and returns its error.
func (l *Limits) Refuse(limit string, status int, format string, args ...any) *Error {
	l.Count(limit)
	return &Error{Limit: limit, Status: status, Msg: fmt.Sprintf(format, args...)}
}

// Count counts one refusal of limit decided elsewhere (the storage
// engine's active series, the PromQL engine's samples).
func (l *Limits) Count(limit string) {
	if l == nil {
		return
	}
	if c := l.refused[limit]; c != nil {
		c.Inc(1)
	}
}

// CheckRequest refuses a write request of more series or samples than one
// request may carry (400: the same request is refused again; the sender
// must send smaller ones).
func (l *Limits) CheckRequest(series, samples int) error {
	c := l.Config()
	if c.MaxSeriesPerRequest > 0 && series > c.MaxSeriesPerRequest {
		return l.Refuse(SeriesPerRequest, http.StatusBadRequest,
			"write request of %d series exceeds %s=%d: send smaller requests", series, SeriesPerRequest, c.MaxSeriesPerRequest)
	}
	if c.MaxSamplesPerRequest > 0 && samples > c.MaxSamplesPerRequest {
		return l.Refuse(SamplesPerRequest, http.StatusBadRequest,
			"write request of %d samples exceeds %s=%d: send smaller requests", samples, SamplesPerRequest, c.MaxSamplesPerRequest)
	}
	return nil
}

// CheckFetchIDs refuses a node RPC Fetch of more series IDs than one
// request may name (400: the requester must ask in smaller pieces).
func (l *Limits) CheckFetchIDs(ids int) error {
	c := l.Config()
	if c.MaxSeriesPerFetch > 0 && ids > c.MaxSeriesPerFetch {
		return l.Refuse(SeriesPerFetch, http.StatusBadRequest,
			"fetch of %d series IDs exceeds %s=%d: fetch in smaller requests", ids, SeriesPerFetch, c.MaxSeriesPerFetch)
	}
	return nil
}

// CheckMetadata refuses a metric metadata record whose metric name, help
// or unit is longer than MaxMetadataLength bytes (400: the same record is
// refused again).
func (l *Limits) CheckMetadata(metric, help, unit string) error {
	c := l.Config()
	if c.MaxMetadataLength <= 0 {
		return nil
	}
	for _, f := range []struct{ what, v string }{{"metric name", metric}, {"help", help}, {"unit", unit}} {
		if len(f.v) > c.MaxMetadataLength {
			return l.Refuse(MetadataLength, http.StatusBadRequest,
				"metadata of %q: %s of %d bytes exceeds %s=%d", truncate([]byte(metric), 64), f.what, len(f.v), MetadataLength, c.MaxMetadataLength)
		}
	}
	return nil
}

// CheckQueryRange refuses a query over [start, end] longer than
// MaxQueryLength or starting before now - MaxQueryLookback (400: the same
// query is refused again). what names the request in the message.
func (l *Limits) CheckQueryRange(what string, start, end, now time.Time) error {
	c := l.Config()
	if d := end.Sub(start); c.MaxQueryLength > 0 && d > c.MaxQueryLength {
		return l.Refuse(QueryLength, http.StatusBadRequest,
			"%s over %v (%s to %s) exceeds %s=%v", what, d, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), QueryLength, c.MaxQueryLength)
	}
	if c.MaxQueryLookback > 0 && start.Before(now.Add(-c.MaxQueryLookback)) {
		return l.Refuse(QueryLookback, http.StatusBadRequest,
			"%s starts at %s, %v ago, past %s=%v", what, start.UTC().Format(time.RFC3339), now.Sub(start).Round(time.Second), QueryLookback, c.MaxQueryLookback)
	}
	return nil
}

// CheckFetchedSeries refuses a query that fetched more series than
// MaxFetchedSeriesPerQuery (422, as Prometheus answers a query over
// query.maxSamples: the query is valid, it is too big to run).
func (l *Limits) CheckFetchedSeries(fetched int) error {
	c := l.Config()
	if c.MaxFetchedSeriesPerQuery > 0 && fetched > c.MaxFetchedSeriesPerQuery {
		return l.Refuse(FetchedSeriesPerQuery, http.StatusUnprocessableEntity,
			"the query fetched %d series, over %s=%d: narrow its selectors or its range", fetched, FetchedSeriesPerQuery, c.MaxFetchedSeriesPerQuery)
	}
	return nil
}

// truncate shortens s for a message: a refused value may be megabytes.
func truncate(s []byte, n int) string {
	if len(s) <= n {
		return string(s)
	}
	return string(s[:n]) + fmt.Sprintf("...(%d bytes)", len(s))
}

// describe formats a series for a message, each value and the whole
// bounded so that a refusal of a huge series stays one readable line.
func describe(rangeFn func(fn func(name, value []byte))) string {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	rangeFn(func(name, value []byte) {
		if b.Len() > 400 {
			n++
			return
		}
		if b.Len() > 1 {
			b.WriteString(", ")
		}
		if utf8.Valid(name) {
			fmt.Fprintf(&b, "%s=%q", truncate(name, 64), truncate(value, 64))
		} else {
			fmt.Fprintf(&b, "%q=%q", truncate(name, 64), truncate(value, 64))
		}
	})
	if n > 0 {
		fmt.Fprintf(&b, ", ... %d more labels", n)
	}
	b.WriteByte('}')
	return b.String()
}
