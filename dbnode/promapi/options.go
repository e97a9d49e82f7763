package promapi

import (
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/tessera-tsdb/tessera/limits"
)

// Defaults of Options, the same as Prometheus' flags.
const (
	DefaultNamespace          = "default"
	DefaultTimeout            = 2 * time.Minute // --query.timeout
	DefaultMaxSamples         = 50_000_000      // --query.max-samples
	DefaultMaxConcurrency     = 20              // --query.max-concurrency
	DefaultLookbackDelta      = 5 * time.Minute // --query.lookback-delta
	DefaultEvaluationInterval = time.Minute     // global evaluation_interval
	// Prometheus has no bound on an expression. These are well above
	// what dashboards send (they nest tens of levels; a Grafana
	// multi-value variable of 3,000 hosts expands into a regex of about
	// 60 KB; VictoriaMetrics' -search.maxQueryLen is 16 KiB) and bound
	// the cost of what passes: the engine's cost grows with an
	// expression's nodes times its depth (bounds.go), so the costliest
	// query within both, a balanced sum of parenthesised 1,000-term
	// chains of 1 filling 64 KiB, takes seconds of a core, not minutes.
	DefaultMaxExpressionBytes = 64 << 10
	DefaultMaxExpressionDepth = 1000 // a chain a + b + ... of 1,001 terms
)

// Options configure the query API. Zero fields take the defaults above.
type Options struct {
	// Namespace is queried unless a request names another with
	// ?namespace=.
	Namespace string
	// Namespaces are every namespace of the node's config, for
	// /api/v1/status/tsdb's per-namespace counts (none: that list is
	// left out).
	Namespaces []string
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
	// rate, increase and delta on (rewrite.go). Default GOMAXPROCS.
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

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = DefaultMaxSamples
	}
	if o.MaxExpressionBytes == 0 {
		o.MaxExpressionBytes = DefaultMaxExpressionBytes
	}
	if o.MaxExpressionDepth == 0 {
		o.MaxExpressionDepth = DefaultMaxExpressionDepth
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	if o.LookbackDelta <= 0 {
		o.LookbackDelta = DefaultLookbackDelta
	}
	if o.EvaluationInterval <= 0 {
		o.EvaluationInterval = DefaultEvaluationInterval
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
