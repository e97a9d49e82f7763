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

// Options configure the HTTP API.
type Options struct {
	// Namespace that remote write and read use unless the request names
	// one with ?namespace=.
	Namespace    string
	MaxBodyBytes int64
	// NumShards is the placement's shard count (4096 by default).
	NumShards uint32
	Logger    *slog.Logger
	Metrics   tally.Scope
	// MetricsHandler serves GET /metrics (the tally Prometheus reporter).
	MetricsHandler http.Handler
	// SeriesCacheSize bounds the series remote write remembers by their
	// label bytes (see seriesCache). Default 1Mi.
	SeriesCacheSize int
	// Limits are applied to remote write (labels of new series, series
	// and samples per request) and remote read (series fetched); nil: none
	// but Prometheus' label rules.
	Limits *limits.Limits
	// MetadataMaxMetrics bounds the metric names whose metadata remote
	// write keeps for /api/v1/metadata (metadata.Store). Default 10000.
	MetadataMaxMetrics int
	// MaxExemplars bounds the exemplars remote write keeps for
	// /api/v1/query_exemplars (exemplars.Store). Default 100000.
	MaxExemplars int
}

// API serves the node's HTTP endpoints. The backend is set once storage
// has recovered; until then writes and reads answer 503 and /ready too.
type API struct {
	opts     Options
	backend  atomic.Pointer[backendBox]
	readyMsg atomic.Pointer[readyFunc]
	damage   atomic.Pointer[[]string] // see SetDamage, ReportDamage
	damageMu sync.Mutex               // serialises changes to damage
	reported int                      // lines ReportDamage added, under damageMu
	mux      *http.ServeMux

	bufs sync.Pool // *[]byte request bodies
	// release returns the memory of pooled buffers dropped for their
	// size (putWriteState, putBuf) to the OS after a burst of them.
	release *retain.Releaser
	states  sync.Pool // *writeState, see getWriteState
	series  *seriesCache
	// seriesV2 is remote write 2.0's series cache, keyed by series ID (a
	// 2.0 request's label references mean nothing outside the request);
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

type backendBox struct{ b Backend }

// writeState is one remote write's working memory, reused across requests.
type writeState struct {
	dec     remote.WriteDecoder
	raw     []byte
	samples []storage.Sample
	// known holds, by series index, the cache entry of each series the
	// decoder recognised (valid where dec.Series[i].Known).
	known []slot
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
	st.dec.Known = func(keys []remote.LabelKey, known []bool) {
		st.known = slices.Grow(st.known[:0], len(keys))[:len(keys)]
		st.add = a.series.lookup(keys, known, st.known, st.add)
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
func New(opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	if opts.NumShards == 0 {
		opts.NumShards = 4096
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.SeriesCacheSize <= 0 {
		opts.SeriesCacheSize = 1 << 20
	}
	if opts.MetadataMaxMetrics <= 0 {
		opts.MetadataMaxMetrics = 10000
	}
	if opts.MaxExemplars <= 0 {
		opts.MaxExemplars = 100000
	}
	a := &API{opts: opts, mux: http.NewServeMux(), series: newSeriesCache(opts.SeriesCacheSize),
		seriesV2: newSeriesCache(opts.SeriesCacheSize), meta: metadata.New(opts.MetadataMaxMetrics),
		ex: exemplars.New(opts.MaxExemplars), resend: metadata.Resend{Every: metadataResendEvery, Max: opts.MetadataMaxMetrics},
		release: &retain.Releaser{Quiet: releaseQuiet}}
	a.SetReady("recovering: storage is not open yet")
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
	return a
}

// Handler is the root handler.
func (a *API) Handler() http.Handler { return a.mux }

// Mux lets other packages (PromQL API, placement API) add routes.
func (a *API) Mux() *http.ServeMux { return a.mux }

// SetBackend makes the API serve from b.
func (a *API) SetBackend(b Backend) { a.backend.Store(&backendBox{b}) }

// SetReady marks the node ready (msg == "") or not ready with a reason
// shown by /ready, e.g. bootstrap progress.
func (a *API) SetReady(msg string) {
	a.SetReadyFunc(func() (string, any) { return msg, nil })
}

// readyFunc says, at the moment /ready is asked, why the node is not
// ready ("" when it is) and the progress to show beside the reason.
type readyFunc func() (reason string, progress any)

// SetReadyFunc makes /ready call f on every request, so progress that
// moves while the reason holds (a bootstrap round streaming) is current
// each time it is read. f must be cheap and safe to call concurrently;
// a non-nil progress is rendered as JSON under "bootstrap".
func (a *API) SetReadyFunc(f func() (reason string, progress any)) {
	rf := readyFunc(f)
	a.readyMsg.Store(&rf)
}

// SetDamage lists damage that storage found on disk at start (a corrupt
// commit log range skipped, an unreadable fileset): /ready shows it under
// "damage" until the node restarts. It does not make the node unready:
// the node serves everything that was not damaged.
func (a *API) SetDamage(lines []string) {
	a.damageMu.Lock()
	defer a.damageMu.Unlock()
	a.damage.Store(&lines)
}

// maxReportedDamage bounds the lines ReportDamage adds to /ready: one per
// distinct damaged page read, so a disk going bad cannot grow it without
// end; the logs and the metrics still count the rest.
const maxReportedDamage = 100

// ReportDamage adds damage found while serving (a damaged fileset page a
// read met) to what /ready lists, once per distinct line, until restart.
func (a *API) ReportDamage(lines ...string) {
	a.damageMu.Lock()
	defer a.damageMu.Unlock()
	var cur []string
	if d := a.damage.Load(); d != nil {
		cur = *d
	}
	next := slices.Clone(cur)
	for _, l := range lines {
		if a.reported >= maxReportedDamage {
			break
		}
		if !slices.Contains(next, l) {
			next = append(next, l)
			a.reported++
		}
	}
	if len(next) > len(cur) {
		a.damage.Store(&next)
	}
}

func (a *API) ready(w http.ResponseWriter, _ *http.Request) {
	msg, progress := (*a.readyMsg.Load())()
	var damage []string
	if d := a.damage.Load(); d != nil {
		damage = *d
	}
	w.Header().Set("Content-Type", "application/json")
	body := struct {
		Ready     bool     `json:"ready"`
		Reason    string   `json:"reason,omitempty"`
		Damage    []string `json:"damage,omitempty"`
		Bootstrap any      `json:"bootstrap,omitempty"`
	}{Ready: msg == "" && a.backend.Load() != nil, Reason: msg, Damage: damage, Bootstrap: progress}
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
	b := a.backend.Load()
	if b == nil {
		return nil, errNotReady
	}
	return b.b, nil
}

func (a *API) namespace(r *http.Request) string {
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	return a.opts.Namespace
}
