package promapi

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/tessera-tsdb/tessera/limits"
)

// Options configure the query API. The node fills them from its config's
// query section (config.Defaults writes the default values, the same as
// Prometheus' flags, not this package); New refuses a zero bound.
type Options struct {
	// Namespace is queried unless a request names another with
	// ?namespace=.
	Namespace string
	// Namespaces are every namespace of the node's config, for
	// /api/v1/status/tsdb's per-namespace counts (none: that list is
	// left out).
	Namespaces []string
	// Rollups are the rollup namespaces by name, with their resolution:
	// a query naming one is answered from its windows (rollup.go), read
	// through the backend's RollupReader.
	Rollups map[string]Rollup
	// RawRetention is Namespace's retention: a range query without
	// ?namespace= reaching back past it is answered from a rollup where
	// raw is gone (stitch.go). 0: never.
	RawRetention time.Duration
	// RollupReader reads them; nil: the backend's, when it is one.
	RollupReader RollupReader
	// Timeout bounds each query's evaluation; a request may ask for less
	// with ?timeout=. Exceeding it answers 503 with errorType "timeout".
	Timeout time.Duration
	// MaxSamples bounds the samples one query may hold in memory at once.
	// Exceeding it answers 422 with errorType "execution".
	MaxSamples int
	// MaxExpressionBytes bounds a query expression's length and
	// MaxExpressionDepth its nesting (exprDepth), both checked before
	// parsing; past either the query answers 400 naming
	// query.maxExpressionBytes or query.maxExpressionDepth. Negative:
	// no bound.
	MaxExpressionBytes int
	MaxExpressionDepth int
	// MaxConcurrency bounds the queries evaluating at once; more wait for
	// a slot within their timeout.
	MaxConcurrency int
	// LookbackDelta is how far back an instant selector looks for a
	// sample; a request may override it with ?lookback_delta=.
	LookbackDelta time.Duration
	// EvaluationInterval is the step of subqueries written without one
	// (x[30m:]), as Prometheus' global evaluation_interval.
	EvaluationInterval time.Duration
	// Parallelism bounds the goroutines one query's fast path computes
	// rate, increase and delta on (rewrite.go); 0 means GOMAXPROCS.
	Parallelism int
	// DisableFastPath evaluates every query with Prometheus' engine
	// alone.
	DisableFastPath bool
	// Exemplars answers /api/v1/query_exemplars (data null when nil).
	Exemplars Exemplars
	// BuildInfo is served at /api/v1/status/buildinfo.
	BuildInfo BuildInfo
	// Limits bound each query: the series it fetches
	// (limits.maxFetchedSeriesPerQuery, 422), the range of query_range
	// (limits.maxQueryLength, 400) and how far back a query starts
	// (limits.maxQueryLookback, 400); refusals of MaxSamples are counted
	// there too. nil: none.
	Limits *limits.Limits
	Logger *slog.Logger
	// Now is the clock for instant queries without ?time=; time.Now when
	// nil.
	Now func() time.Time
	// BlockSize is the namespace's block size in milliseconds, for the
	// bounds /api/v1/status/tsdb reports (0: reported as 0).
	BlockSize int64
}

// BuildInfo is what /api/v1/status/buildinfo reports: the server's own
// version and commit (Tessera's, set by the node), as Mimir and Thanos do,
// with Application naming the server and PrometheusVersion the Prometheus
// release whose PromQL engine answers the queries (what Grafana users
// pick as the data source's Prometheus version).
type BuildInfo struct {
	Application       string `json:"application,omitempty"`
	PrometheusVersion string `json:"prometheusVersion,omitempty"`
	Version           string `json:"version"`
	Revision          string `json:"revision"`
	Branch            string `json:"branch"`
	BuildUser         string `json:"buildUser"`
	BuildDate         string `json:"buildDate"`
	GoVersion         string `json:"goVersion"`
}

// validate refuses the bounds a config always fills: a zero here is a
// caller that skipped config.Defaults.
func (o Options) validate() error {
	var errs []error
	bad := func(field string, ok bool, v any) {
		if !ok {
			errs = append(errs, fmt.Errorf("promapi: options: %s must be > 0, got %v", field, v))
		}
	}
	bad("Namespace", o.Namespace != "", `""`)
	bad("Timeout", o.Timeout > 0, o.Timeout)
	bad("MaxSamples", o.MaxSamples > 0, o.MaxSamples)
	bad("MaxConcurrency", o.MaxConcurrency > 0, o.MaxConcurrency)
	bad("LookbackDelta", o.LookbackDelta > 0, o.LookbackDelta)
	bad("EvaluationInterval", o.EvaluationInterval > 0, o.EvaluationInterval)
	for _, b := range []struct {
		field string
		v     int
	}{{"MaxExpressionBytes", o.MaxExpressionBytes}, {"MaxExpressionDepth", o.MaxExpressionDepth}} {
		if b.v == 0 || b.v < -1 {
			errs = append(errs, fmt.Errorf("promapi: options: %s must be > 0, or -1 for no bound, got %d", b.field, b.v))
		}
	}
	return errors.Join(errs...)
}

// resolved fills what is not a setting: the seams left nil (logger,
// clock), the meaning of Parallelism 0, and the facts BuildInfo reports
// that the caller did not.
func (o Options) resolved() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	if o.BuildInfo.PrometheusVersion == "" {
		// The Prometheus release whose engine we embed (module v0.316.0).
		o.BuildInfo.PrometheusVersion = "3.16.0"
	}
	if o.BuildInfo.Version == "" {
		o.BuildInfo.Version = o.BuildInfo.PrometheusVersion
	}
	if o.BuildInfo.GoVersion == "" {
		o.BuildInfo.GoVersion = runtime.Version()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// engineOpts are the promql.Engine settings of a Prometheus server with
// these options: the @ modifier and negative offsets on, as Prometheus 3
// has them.
func (o Options) engineOpts() promql.EngineOpts {
	interval := o.EvaluationInterval.Milliseconds()
	return promql.EngineOpts{
		Logger:                   o.Logger,
		MaxSamples:               o.MaxSamples,
		Timeout:                  o.Timeout,
		LookbackDelta:            o.LookbackDelta,
		NoStepSubqueryIntervalFn: func(int64) int64 { return interval },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		ActiveQueryTracker:       newSlots(o.MaxConcurrency),
	}
}
