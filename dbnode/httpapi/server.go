package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/retain"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/uber-go/tally/v4"
)

// Options configure the HTTP API. The node fills them from its config
// (config.Defaults writes the default values, not this package): New
// refuses a zero size, count or shard count.
type Options struct {
	// Namespace that remote write and read use unless the request names
	// one with ?namespace=.
	Namespace string
	// MaxBodyBytes bounds a remote write or read body, compressed and
	// decompressed (config http.maxBodyBytes).
	MaxBodyBytes int64
	// NumShards is the placement's shard count (config cluster.numShards).
	NumShards uint32
	Logger    *slog.Logger // nil: discard
	Metrics   tally.Scope  // nil: tally.NoopScope
	// MetricsHandler serves GET /metrics (the tally Prometheus reporter).
	MetricsHandler http.Handler
	// SeriesCacheSize bounds the series remote write remembers by their
	// label bytes (see seriesCache; config http.seriesCacheSize).
	SeriesCacheSize int
	// Limits are applied to remote write (labels of new series, series
	// and samples per request) and remote read (series fetched); nil: none
	// but Prometheus' label rules.
	Limits *limits.Limits
	// MetadataMaxMetrics bounds the metric names whose metadata remote
	// write keeps for /api/v1/metadata (metadata.Store; config
	// ingest.metadataMaxMetrics).
	MetadataMaxMetrics int
	// MaxExemplars bounds the exemplars remote write keeps for
	// /api/v1/query_exemplars (exemplars.Store; config ingest.maxExemplars).
	MaxExemplars int
	// Backend serves writes and reads from the start, and the API is
	// ready at once: a node that serves from a database it already holds
	// (tests, tools). A node that binds HTTP before its storage recovers
	// passes State instead.
	Backend Backend
	// State, when set, is asked on every request for the backend (nil
	// while storage recovers: writes and reads answer 503), whether the
	// node is ready and the damage storage found at start. It replaces
	// Backend.
	State State
	// Rollups are the rollup namespaces of Namespace's chain: a remote
	// read without ?namespace= whose range starts before what Namespace
	// surely still holds (RawRetention, RawBlockSize) is answered from
	// them for that part, read through RollupReader (rollupread.go).
	// None, or RollupReader nil: raw only.
	Rollups      []RollupNamespace
	RawRetention time.Duration
	RawBlockSize time.Duration
	RollupReader RollupReader
	// Now is the clock those retentions count from; time.Now when nil.
	Now func() time.Time
}

// State is a node's lifecycle as the API sees it, owned by whoever starts
// the node; the API asks on every request, so it never needs telling.
// Every method must be cheap and safe to call concurrently.
type State interface {
	// Backend is what writes and reads go to; nil until storage is open.
	Backend() Backend
	// Ready says why the node is not ready ("" when it is) and, when
	// non-nil, the progress /ready renders as JSON under "bootstrap"
	// (read anew each time, so a streaming round's counters are current).
	Ready() (reason string, progress any)
	// Damage lists damage storage found on disk at start (a corrupt commit
	// log range skipped, an unreadable fileset), shown on /ready under
	// "damage". It does not make the node unready: the node serves
	// everything that was not damaged.
	Damage() []string
}

func (o Options) validate() error {
	var errs []error
	bad := func(field string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("httpapi: options: %s must be > 0, got %d", field, v))
		}
	}
	bad("MaxBodyBytes", o.MaxBodyBytes)
	bad("NumShards", int64(o.NumShards))
	bad("SeriesCacheSize", int64(o.SeriesCacheSize))
	bad("MetadataMaxMetrics", int64(o.MetadataMaxMetrics))
	bad("MaxExemplars", int64(o.MaxExemplars))
	if o.Backend != nil && o.State != nil {
		errs = append(errs, errors.New("httpapi: options: Backend and State both set"))
	}
	return errors.Join(errs...)
}

// API serves the node's HTTP endpoints. Until its State has a backend
// (storage recovered), writes and reads answer 503 and /ready too.
type API struct {
	opts     Options
	reported atomic.Pointer[[]string] // see ReportDamage
	damageMu sync.Mutex               // serialises changes to reported
	mux      *http.ServeMux

	bufs sync.Pool // *[]byte request bodies
	// release returns the memory of pooled buffers dropped for their
	// size (putWriteState, putBuf) to the OS after a burst of them.
	release *retain.Releaser
	states  sync.Pool // *writeState, see getWriteState
	series  *seriesCache
	// seriesV2 is remote write 2.0's series cache, keyed by series ID (a
	// 2.0 request's label references mean nothing outside the request;
	// 2.0 finds an entry by its labels' strings, lookupV2, OTLP by ID);
	// apart from the 1.0 cache, whose keys are label bytes on the wire.
	seriesV2 *seriesCache
	meta     *metadata.Store
	ex       *exemplars.Store
	// resend keeps a cluster coordinator from forwarding the same
	// metadata with every request (remote write 2.0 carries it per series).
	resend metadata.Resend

	m apiMetrics
}

// releaseQuiet is how long after the last oversized request the node
// returns their memory (retain.Releaser): long enough that a burst costs
// one collection, short enough that memory is back within a minute.
const releaseQuiet = 5 * time.Second

// writeState is one remote write's working memory, reused across requests.
type writeState struct {
	dec     remote.WriteDecoder
	raw     []byte
	samples []storage.Sample
	// known holds, by series index, the cache entry of each series the
	// decoder recognised (valid where dec.Series[i].Known).
	known hits
	// add collects the series to put into the cache after the write.
	add []newSeries
	// dec2 and known2 are remote write 2.0's decoder and cache hits.
	dec2   remote.WriteDecoderV2
	known2 []bool
}

func (a *API) newWriteState() *writeState {
	st := &writeState{}
	st.dec.Limits = a.opts.Limits
	st.dec2.Limits = a.opts.Limits
	st.dec2.DeferLabelChecks = true // remoteWriteV2 checks the cache's misses
	st.dec2.DeferIDs = true         // and builds their IDs (lookupV2)
	st.dec.Known = func(keys []remote.LabelKey, known []bool) {
		st.known.reset(len(keys))
		st.add = a.series.lookup(keys, known, &st.known, st.add)
	}
	return st
}

type apiMetrics struct {
	samplesIn   tally.Counter
	exemplarsIn tally.Counter
	seriesIn    tally.Counter
	cacheHits   tally.Counter
	cacheMisses tally.Counter
	// readSeriesDamaged counts series remote read left out of answers
	// because their stored data is damaged.
	readSeriesDamaged tally.Counter
	writeErrors       func(reason string) tally.Counter
	latency           func(handler string) tally.Histogram
}

// New builds the API; mount it with Handler.
func New(opts Options) (*API, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	a := &API{opts: opts, mux: http.NewServeMux(), series: newSeriesCache(opts.SeriesCacheSize),
		seriesV2: newSeriesCache(opts.SeriesCacheSize), meta: metadata.New(opts.MetadataMaxMetrics),
		ex: exemplars.New(opts.MaxExemplars), resend: metadata.Resend{Every: metadataResendEvery, Max: opts.MetadataMaxMetrics},
		release: &retain.Releaser{Quiet: releaseQuiet}}
	buckets := tally.DurationBuckets{time.Millisecond, 5 * time.Millisecond, 25 * time.Millisecond,
		100 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second}
	var errMu sync.Mutex
	errCounters := map[string]tally.Counter{}
	var latMu sync.Mutex
	lat := map[string]tally.Histogram{}
	a.m = apiMetrics{
		samplesIn:         opts.Metrics.Counter("remote_write_samples"),
		exemplarsIn:       opts.Metrics.Counter("remote_write_exemplars"),
		seriesIn:          opts.Metrics.Counter("remote_write_series"),
		cacheHits:         opts.Metrics.Counter("remote_write_series_cache_hits"),
		cacheMisses:       opts.Metrics.Counter("remote_write_series_cache_misses"),
		readSeriesDamaged: opts.Metrics.Counter("remote_read_series_damaged"),
		writeErrors: func(reason string) tally.Counter {
			errMu.Lock()
			defer errMu.Unlock()
			c, ok := errCounters[reason]
			if !ok {
				c = opts.Metrics.Tagged(map[string]string{"reason": reason}).Counter("remote_write_errors")
				errCounters[reason] = c
			}
			return c
		},
		latency: func(h string) tally.Histogram {
			latMu.Lock()
			defer latMu.Unlock()
			c, ok := lat[h]
			if !ok {
				c = opts.Metrics.Tagged(map[string]string{"handler": h}).Histogram("request_duration_seconds", buckets)
				lat[h] = c
			}
			return c
		},
	}
	a.handle("POST /api/v1/prom/remote/write", "remote_write", a.remoteWrite)
	a.handle("POST /api/v1/write", "remote_write", a.remoteWrite)
	a.mux.HandleFunc("POST /api/v1/otlp/v1/metrics", a.otlpWrite) // otlp.go
	a.handle("POST /api/v1/prom/remote/read", "remote_read", a.remoteRead)
	a.handle("POST /api/v1/read", "remote_read", a.remoteRead)
	a.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"ok":true}`)
	})
	a.mux.HandleFunc("GET /ready", a.ready)
	a.mux.HandleFunc("GET /api/v1/metadata", a.metricMetadata)
	// Profiles, as Prometheus and etcd serve them, for "why is it slow".
	a.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	a.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	a.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	a.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	if opts.MetricsHandler != nil {
		a.mux.Handle("GET /metrics", opts.MetricsHandler)
	}
	return a, nil
}

// Handler is the root handler.
func (a *API) Handler() http.Handler { return a.mux }

// Mux lets other packages (PromQL API, placement API) add routes.
func (a *API) Mux() *http.ServeMux { return a.mux }

// maxReportedDamage bounds the lines ReportDamage adds to /ready: one per
// distinct damaged page read, so a disk going bad cannot grow it without
// end; the logs and the metrics still count the rest.
const maxReportedDamage = 100

// ReportDamage adds damage found while serving (a damaged fileset page a
// read met) to what /ready lists after State's, once per distinct line,
// until restart.
func (a *API) ReportDamage(lines ...string) {
	a.damageMu.Lock()
	defer a.damageMu.Unlock()
	var cur []string
	if d := a.reported.Load(); d != nil {
		cur = *d
	}
	next := slices.Clone(cur)
	for _, l := range lines {
		if len(next) >= maxReportedDamage {
			break
		}
		if !slices.Contains(next, l) {
			next = append(next, l)
		}
	}
	if len(next) > len(cur) {
		a.reported.Store(&next)
	}
}

// damage is what /ready lists: what storage found at start, then what
// reads met since.
func (a *API) damage() []string {
	var start, reported []string
	if a.opts.State != nil {
		start = a.opts.State.Damage()
	}
	if d := a.reported.Load(); d != nil {
		reported = *d
	}
	if len(reported) == 0 {
		return start
	}
	all := slices.Clone(start)
	for _, l := range reported {
		if !slices.Contains(all, l) {
			all = append(all, l)
		}
	}
	return all
}

func (a *API) ready(w http.ResponseWriter, _ *http.Request) {
	var msg string
	var progress any
	if a.opts.State != nil {
		msg, progress = a.opts.State.Ready()
	}
	_, err := a.getBackend()
	if msg == "" && err != nil {
		msg = "recovering: storage is not open yet" // a not-ready answer always says why
	}
	damage := a.damage()
	w.Header().Set("Content-Type", "application/json")
	body := struct {
		Ready     bool     `json:"ready"`
		Reason    string   `json:"reason,omitempty"`
		Damage    []string `json:"damage,omitempty"`
		Bootstrap any      `json:"bootstrap,omitempty"`
	}{Ready: msg == "" && err == nil, Reason: msg, Damage: damage, Bootstrap: progress}
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

func (a *API) handle(pattern, name string, h func(http.ResponseWriter, *http.Request) error) {
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		err := h(w, r)
		a.m.latency(name).RecordDuration(time.Since(start))
		if err == nil {
			return
		}
		code, reason := classify(err)
		if name == "remote_write" {
			a.m.writeErrors(reason).Inc(1)
		}
		if code >= 500 {
			a.opts.Logger.Warn("request failed", "handler", name, "code", code, "err", err)
		}
		http.Error(w, err.Error(), code)
	})
}

var errNotReady = errors.New("node is not ready: storage is recovering")

// classify maps an error to an HTTP status as the remote write spec asks:
// 400 for input that can never succeed, 413 for a body too large, 503 for
// trouble worth retrying.
func classify(err error) (int, string) {
	var ie *remote.InputError
	var tl *remote.TooLargeError
	var rej *storage.RejectedError
	var le *limits.Error
	var um *unsupportedMediaError
	switch {
	case errors.As(err, &um):
		return http.StatusUnsupportedMediaType, "unsupported_media_type"
	case errors.As(err, &tl):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.As(err, &le):
		if le.Limit != "" {
			return le.Status, "limit"
		}
		return le.Status, "bad_request"
	case errors.As(err, &rej) && rej.ByReason[storage.ReasonSeriesLimit] > 0:
		// Some samples were refused because their series would be new
		// past limits.maxActiveSeries: a retry may store them once series
		// go idle or the limit is raised, so 429 even if others were
		// refused for good (they are refused again, harmlessly, and the
		// answer becomes 400 once the limit lets the rest in).
		return http.StatusTooManyRequests, storage.ReasonSeriesLimit.String()
	case errors.As(err, &ie):
		if ie.Reason != "" {
			return http.StatusBadRequest, ie.Reason
		}
		return http.StatusBadRequest, "bad_request"
	case errors.As(err, &rej):
		reason := "rejected"
		for r := range rej.ByReason {
			reason = r.String()
			break
		}
		return http.StatusBadRequest, reason
	case errors.As(err, new(*storage.PartialError)):
		// Some series' stored data is damaged. Remote read answers the
		// others (see remoteRead); a handler that cannot fails, naming
		// the damage. Retrying does not help.
		return http.StatusInternalServerError, "damaged_data"
	case errors.Is(err, storage.ErrUnknownNamespace):
		return http.StatusBadRequest, "unknown_namespace"
	case errors.Is(err, storage.ErrOverloaded):
		return http.StatusServiceUnavailable, "commitlog_full"
	case errors.Is(err, storage.ErrClosed), errors.Is(err, errNotReady):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusServiceUnavailable, "internal"
}

func (a *API) getBackend() (Backend, error) {
	b := a.opts.Backend
	if a.opts.State != nil {
		b = a.opts.State.Backend()
	}
	if b == nil {
		return nil, errNotReady
	}
	return b, nil
}

func (a *API) namespace(r *http.Request) string {
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	return a.opts.Namespace
}
