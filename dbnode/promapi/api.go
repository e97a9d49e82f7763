package promapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/limits"
)

// API serves the Prometheus HTTP query API over a Backend. It is safe for
// concurrent use.
type API struct {
	b      query.Reader
	opts   Options
	engine *promql.Engine
	// inner is the engine the fast path evaluates a selection holding
	// native histograms with (engineset.go): the plain engine's options
	// without its concurrency slots, which the calling query holds.
	inner *promql.Engine
	// fast is the engine whose parser rewrites the calls the fast path
	// computes (rewrite.go), nil when Options.DisableFastPath. Both
	// engines share one query tracker, so MaxConcurrency bounds them
	// together.
	fast       *promql.Engine
	fastMarker string
	fastStats  fastStats
	parser     parser.Parser
	// rollup is the engine whose parser rewrites the calls a rollup
	// namespace answers from its windows (rollup.go).
	rollup       *promql.Engine
	rollupMarker string
	stitched     atomic.Int64 // range queries split between a rollup and raw (stitch.go)
}

// New returns the query API over b, with opts as the node filled them
// from its config.
func New(b query.Reader, opts Options) (*API, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.resolved()
	eo := opts.engineOpts()
	a := &API{b: b, opts: opts, engine: promql.NewEngine(eo), parser: parser.NewParser(parser.Options{})}
	if !opts.DisableFastPath {
		fp := newFastParser()
		eo.Parser = fp
		a.fast, a.fastMarker = promql.NewEngine(eo), fp.marker
		io := opts.engineOpts()
		io.ActiveQueryTracker = nil
		a.inner = promql.NewEngine(io)
	}
	rp := newRollupParser()
	eo.Parser = rp
	a.rollup, a.rollupMarker = promql.NewEngine(eo), rp.marker
	return a, nil
}

// Register adds the endpoints to mux: query, query_range, series and labels
// answer GET and form POST, as in Prometheus; label values and buildinfo
// answer GET.
func (a *API) Register(mux *http.ServeMux) {
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /api/v1/query", a.wrap(a.query))
		mux.HandleFunc(m+" /api/v1/query_range", a.wrap(a.queryRange))
		mux.HandleFunc(m+" /api/v1/series", a.wrap(a.series))
		mux.HandleFunc(m+" /api/v1/labels", a.wrap(a.labelNames))
		mux.HandleFunc(m+" /api/v1/query_exemplars", a.wrap(a.queryExemplars))
	}
	mux.HandleFunc("GET /api/v1/label/{name}/values", a.wrap(a.labelValues))
	mux.HandleFunc("GET /api/v1/status/buildinfo", a.wrap(a.buildInfo))
	mux.HandleFunc("GET /api/v1/status/tsdb", a.wrap(a.tsdbStatus)) // tsdbstatus.go
}

// result is what a handler answers: an appender writing the "data" field
// and the warnings to report with it, or an error.
type result struct {
	data func(dst []byte) ([]byte, error)
	// body, when set, is the response rendered so far: successPrefix and
	// the data (a query's result, rendered while the engine still lends
	// its memory), so that respond appends the rest to it instead of
	// copying megabytes into a buffer of its own.
	body     []byte
	warnings annotations.Annotations
	query    string // for the positions in annotation messages
	err      *apiError
	// fallback: the fast path declined the query (errFallback); run it
	// with the plain engine.
	fallback bool
}

func (a *API) wrap(h func(r *http.Request) result) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			a.respondError(w, badData(fmt.Errorf("error parsing form values: %w", err)))
			return
		}
		res := h(r)
		if res.err != nil {
			a.respondError(w, res.err)
			return
		}
		a.respond(w, r, res)
	}
}

// successPrefix opens every successful response; the data follows.
const successPrefix = `{"status":"success","data":`

// initialResponseCap is the first capacity of a response body: most
// answers (an instant vector of a few series) fit without growing it.
const initialResponseCap = 4 << 10

func (a *API) respond(w http.ResponseWriter, r *http.Request, res result) {
	buf := res.body
	if buf == nil {
		buf = append(make([]byte, 0, initialResponseCap), successPrefix...)
		var err error
		if buf, err = res.data(buf); err != nil {
			a.opts.Logger.Error("encode query API response", "err", err)
			a.respondError(w, &apiError{errorInternal, err})
			return
		}
	}
	warns, infos := res.warnings.AsStrings(res.query, 10, 10)
	buf = appendStrings(buf, "warnings", warns)
	buf = appendStrings(buf, "infos", infos)
	buf = append(buf, '}')
	w.Header().Set("Content-Type", "application/json")
	if err := writeBody(w, r, http.StatusOK, buf); err != nil {
		a.opts.Logger.Debug("write query API response", "err", err)
	}
}

// writeBody writes body, gzipped when the client accepts it and the body
// is worth it, as Prometheus compresses its API responses.
//
// At the fastest level: on a range query over many series, compressing
// the JSON at gzip's default level took two thirds of the server's CPU,
// more than evaluating the query (BenchmarkWriteBody: the fastest level
// is several times quicker for a response about a third larger, still a
// small fraction of the JSON). Writers are pooled: each holds
// the compressor's tables.
func writeBody(w http.ResponseWriter, r *http.Request, code int, body []byte) error {
	w.Header().Add("Vary", "Accept-Encoding")
	if len(body) < 1024 || !acceptsGzip(r) {
		w.WriteHeader(code)
		_, err := w.Write(body)
		return err
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.WriteHeader(code)
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(w)
	if _, err := zw.Write(body); err != nil {
		return err
	}
	return zw.Close()
}

var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return zw
}}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) == "gzip" && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// appendStrings writes ,"key":[...] when ss is not empty (omitempty).
func appendStrings(dst []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return dst
	}
	dst = append(dst, ',')
	dst = appendString(dst, key)
	dst = append(dst, ':')
	return appendStringArray(dst, ss)
}

func appendStringArray(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

func (a *API) respondError(w http.ResponseWriter, e *apiError) {
	if e.typ == errorInternal || e.typ == errorUnavailable {
		a.opts.Logger.Warn("query API error", "type", e.typ, "err", e.err)
	}
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", string(e.typ), e.err.Error()})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.typ.status())
	_, _ = w.Write(b)
}

func (a *API) queryable(r *http.Request) queryable {
	ns := r.FormValue("namespace")
	if ns == "" {
		ns = a.opts.Namespace
	}
	return queryable{b: a.b, ns: ns, limits: a.opts.Limits}
}

// queryTimeout bounds ctx by the query timeout, or by ?timeout= when
// shorter, from the moment the request is read: parsing, planning, the
// fast path and a fallback to the engine all spend the one budget (the
// engine's own timeout starts again at each Exec). The parser cannot be
// interrupted; checkExpression bounds its cost instead.
func (a *API) queryTimeout(ctx context.Context, r *http.Request) (context.Context, context.CancelFunc, *apiError) {
	d := a.opts.Timeout
	if v := r.FormValue("timeout"); v != "" {
		t, err := parseDuration(v)
		if err != nil {
			return nil, nil, invalidParam(err, "timeout")
		}
		if t <= 0 {
			return nil, nil, invalidParam(fmt.Errorf("timeout must be positive, got %s", t), "timeout")
		}
		d = min(d, t)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, cancel, nil
}

func queryOpts(r *http.Request) (promql.QueryOpts, *apiError) {
	var lookback time.Duration
	if v := r.FormValue("lookback_delta"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, badData(fmt.Errorf("error parsing lookback delta duration: %w", err))
		}
		lookback = d
	}
	return promql.NewPrometheusQueryOpts(false, lookback, nil), nil
}

func (a *API) query(r *http.Request) result {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return result{err: invalidParam(err, "limit")}
	}
	ts, err := timeParam(r.FormValue("time"), "time", a.opts.Now())
	if err != nil {
		return result{err: invalidParam(err, "time")}
	}
	if err := a.opts.Limits.CheckQueryRange("query", ts, ts, a.opts.Now()); err != nil {
		return result{err: queryError(err)}
	}
	ctx, cancel, aerr := a.queryTimeout(r.Context(), r)
	if aerr != nil {
		return result{err: aerr}
	}
	defer cancel()
	opts, aerr := queryOpts(r)
	if aerr != nil {
		return result{err: aerr}
	}
	qs := r.FormValue("query")
	ms := timestamp.FromTime(ts)
	if pl, ok := a.planStitch(r, qs, ts, ts, 0); ok {
		a.stitched.Add(1)
		return a.execRollup(ctx, r, qs, limit, fastRange{start: ms, end: ms}, pl.rollup, pl.res, pl, func(e *promql.Engine, q storage.Queryable) (promql.Query, error) {
			return e.NewInstantQuery(ctx, q, opts, qs, ts)
		})
	}
	return a.withUnstitched(r, qs, ts, a.exec(ctx, r, qs, limit, fastRange{start: ms, end: ms}, func(e *promql.Engine, q storage.Queryable) (promql.Query, error) {
		return e.NewInstantQuery(ctx, q, opts, qs, ts)
	}))
}

// withUnstitched adds to a raw answer the warning of a query that read
// before raw surely holds data without the stitch (unstitchedWarning).
func (a *API) withUnstitched(r *http.Request, qs string, start time.Time, res result) result {
	if res.err != nil || res.fallback {
		return res
	}
	if w := a.unstitchedWarning(r, qs, start); w != nil {
		res.warnings = res.warnings.Add(w)
	}
	return res
}

func (a *API) queryRange(r *http.Request) result {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return result{err: invalidParam(err, "limit")}
	}
	start, err := parseTime(r.FormValue("start"))
	if err != nil {
		return result{err: invalidParam(err, "start")}
	}
	end, err := parseTime(r.FormValue("end"))
	if err != nil {
		return result{err: invalidParam(err, "end")}
	}
	if end.Before(start) {
		return result{err: invalidParam(errors.New("end timestamp must not be before start time"), "end")}
	}
	if err := a.opts.Limits.CheckQueryRange("query_range", start, end, a.opts.Now()); err != nil {
		return result{err: queryError(err)}
	}
	step, err := parseDuration(r.FormValue("step"))
	if err != nil {
		return result{err: invalidParam(err, "step")}
	}
	if step <= 0 {
		return result{err: invalidParam(errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer"), "step")}
	}
	// As Prometheus: at most 11,000 points per series, enough for a week
	// at 60 s or a year at 1 h.
	if end.Sub(start)/step > 11000 {
		return result{err: badData(errors.New("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"))}
	}
	ctx, cancel, aerr := a.queryTimeout(r.Context(), r)
	if aerr != nil {
		return result{err: aerr}
	}
	defer cancel()
	opts, aerr := queryOpts(r)
	if aerr != nil {
		return result{err: aerr}
	}
	qs := r.FormValue("query")
	if pl, ok := a.planStitch(r, qs, start, end, step); ok {
		return a.execStitched(ctx, r, qs, limit, pl, start, end, step, opts)
	}
	fr := fastRange{start: timestamp.FromTime(start), end: timestamp.FromTime(end), stp: step.Milliseconds()}
	return a.withUnstitched(r, qs, start, a.exec(ctx, r, qs, limit, fr, func(e *promql.Engine, q storage.Queryable) (promql.Query, error) {
		return e.NewRangeQuery(ctx, q, opts, qs, start, end, step)
	}))
}

// exec runs the query newQuery makes, with the fast path unless it is off
// or the request asks for stats (the fast path's work is not the
// engine's, so its sample counts would differ), and again with the plain
// engine if the fast path declines it.
func (a *API) exec(ctx context.Context, r *http.Request, qs string, limit int, fr fastRange,
	newQuery func(*promql.Engine, storage.Queryable) (promql.Query, error)) result {
	if aerr := a.checkExpression(qs); aerr != nil {
		return result{err: aerr}
	}
	qa := a.queryable(r)
	if ru, ok := a.opts.Rollups[qa.ns]; ok {
		return a.execRollup(ctx, r, qs, limit, fr, qa.ns, ru.Resolution, stitchPlan{}, newQuery)
	}
	if a.fast != nil && r.FormValue("stats") == "" {
		fr.marker, fr.parallelism, fr.maxSamples, fr.stats = a.fastMarker, a.opts.Parallelism, a.opts.MaxSamples, &a.fastStats
		fr.engine = a.inner
		// The engine's lookback: the request's, else the default.
		fr.lookback = a.opts.LookbackDelta.Milliseconds()
		fr.opts, _ = queryOpts(r)
		if o := fr.opts; o != nil && o.LookbackDelta() > 0 {
			fr.lookback = o.LookbackDelta().Milliseconds()
		}
		fr.handover = &handover{}
		fq := qa
		fq.fast = &fr
		qry, err := newQuery(a.fast, fq)
		if err != nil {
			return result{err: constructionError(err)}
		}
		if res := a.run(ctx, r, qry, qs, limit); !res.fallback {
			return res
		}
		a.fastStats.declined.Add(1)
		// The fast path declined before decoding what it read: the
		// engine's selectors take those reads (handover.go).
		qa.b = fr.handover.reader(qa.b)
	}
	qry, err := newQuery(a.engine, qa)
	if err != nil {
		return result{err: constructionError(err)}
	}
	return a.run(ctx, r, qry, qs, limit)
}

// run executes qry and renders its result before closing it: the engine
// recycles the result's memory on Close.
func (a *API) run(ctx context.Context, r *http.Request, qry promql.Query, qs string, limit int) result {
	defer qry.Close()
	res := qry.Exec(ctx)
	if errors.Is(res.Err, errFallback) {
		return result{fallback: true}
	}
	if res.Err != nil {
		var tooMany promql.ErrTooManySamples
		if errors.As(res.Err, &tooMany) {
			a.opts.Limits.Count(limits.QuerySamples)
			return result{err: &apiError{errorExec, fmt.Errorf("%w (%s=%d)", tooMany, limits.QuerySamples, a.opts.MaxSamples)}}
		}
		return result{err: queryError(res.Err)}
	}
	warnings := res.Warnings
	value := res.Value
	if limit > 0 {
		switch v := value.(type) {
		case promql.Matrix:
			if len(v) > limit {
				value = v[:limit]
				warnings = warnings.Add(errors.New("results truncated due to limit"))
			}
		case promql.Vector:
			if len(v) > limit {
				value = v[:limit]
				warnings = warnings.Add(errors.New("results truncated due to limit"))
			}
		}
	}
	var statsJSON []byte
	if r.FormValue("stats") != "" {
		b, err := json.Marshal(stats.NewQueryStats(qry.Stats()))
		if err != nil {
			return result{err: &apiError{errorInternal, fmt.Errorf("encode stats: %w", err)}}
		}
		statsJSON = b
	}
	// Render now, while the result's memory is still the engine's to lend.
	// The closing brace, warnings and infos fit in the spare 1 KiB mostly.
	buf := append(make([]byte, 0, 1024+len(successPrefix)+valueSize(value)), successPrefix...)
	buf = append(buf, `{"resultType":`...)
	buf = appendString(buf, string(value.Type()))
	buf = append(buf, `,"result":`...)
	buf, err := appendValue(buf, value)
	if err != nil {
		return result{err: &apiError{errorInternal, fmt.Errorf("encode result: %w", err)}}
	}
	if statsJSON != nil {
		buf = append(buf, `,"stats":`...)
		buf = append(buf, statsJSON...)
	}
	buf = append(buf, '}')
	return result{
		body:     buf,
		warnings: warnings,
		query:    qs,
	}
}

// rangeParams reads the optional start and end of the metadata endpoints.
func rangeParams(r *http.Request) (start, end time.Time, _ *apiError) {
	start, err := timeParam(r.FormValue("start"), "start", minTime)
	if err != nil {
		return start, end, invalidParam(err, "start")
	}
	end, err = timeParam(r.FormValue("end"), "end", maxTime)
	if err != nil {
		return start, end, invalidParam(err, "end")
	}
	return start, end, nil
}

func (a *API) series(r *http.Request) result {
	if len(r.Form["match[]"]) == 0 {
		return result{err: badData(errors.New("no match[] parameter provided"))}
	}
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return result{err: invalidParam(err, "limit")}
	}
	start, end, aerr := rangeParams(r)
	if aerr != nil {
		return result{err: aerr}
	}
	sets, err := parseMatchers(a.parser, r.Form["match[]"])
	if err != nil {
		return result{err: invalidParam(err, "match[]")}
	}
	ctx := r.Context()
	q, err := a.queryable(r).Querier(timestamp.FromTime(start), timestamp.FromTime(end))
	if err != nil {
		return result{err: queryError(err)}
	}
	defer q.Close()
	hints := &storage.SelectHints{
		Start: timestamp.FromTime(start),
		End:   timestamp.FromTime(end),
		Func:  "series", // no samples needed
		Limit: hintLimit(limit),
	}
	var set storage.SeriesSet
	if len(sets) > 1 {
		all := make([]storage.SeriesSet, 0, len(sets))
		for _, ms := range sets {
			// Sorted, so that the merge removes duplicates.
			all = append(all, q.Select(ctx, true, hints, ms...))
		}
		set = storage.NewMergeSeriesSet(all, 0, storage.ChainedSeriesMerge)
	} else {
		set = q.Select(ctx, false, hints, sets[0]...)
	}
	var (
		found    []labels.Labels
		warnings annotations.Annotations
	)
	for set.Next() {
		found = append(found, set.At().Labels())
		if limit > 0 && len(found) > limit {
			found = found[:limit]
			warnings = warnings.Add(errors.New("results truncated due to limit"))
			break
		}
	}
	if err := set.Err(); err != nil {
		return result{err: queryError(err)}
	}
	// After the walk: a set reports the series it skipped as it goes.
	warnings = warnings.Merge(set.Warnings())
	return result{
		data: func(dst []byte) ([]byte, error) {
			dst = append(dst, '[')
			for i, ls := range found {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = appendLabels(dst, ls)
			}
			return append(dst, ']'), nil
		},
		warnings: warnings,
	}
}

func (a *API) labelNames(r *http.Request) result {
	return a.labelQuery(r, func(ctx context.Context, q storage.Querier, h *storage.LabelHints, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelNames(ctx, h, ms...)
	})
}

func (a *API) labelValues(r *http.Request) result {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if !model.UTF8Validation.IsValidLabelName(name) {
		return result{err: badData(fmt.Errorf("invalid label name: %q", name))}
	}
	return a.labelQuery(r, func(ctx context.Context, q storage.Querier, h *storage.LabelHints, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelValues(ctx, name, h, ms...)
	})
}

// labelQuery answers /labels and /label/<name>/values: the union over the
// match[] sets (all series without one), sorted, optionally limited.
func (a *API) labelQuery(r *http.Request, get func(context.Context, storage.Querier, *storage.LabelHints, []*labels.Matcher) ([]string, annotations.Annotations, error)) result {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return result{err: invalidParam(err, "limit")}
	}
	start, end, aerr := rangeParams(r)
	if aerr != nil {
		return result{err: aerr}
	}
	sets, err := parseMatchers(a.parser, r.Form["match[]"])
	if err != nil {
		return result{err: badData(err)}
	}
	q, err := a.queryable(r).Querier(timestamp.FromTime(start), timestamp.FromTime(end))
	if err != nil {
		return result{err: queryError(err)}
	}
	defer q.Close()
	hints := &storage.LabelHints{Limit: hintLimit(limit)}
	var (
		vals     []string
		warnings annotations.Annotations
	)
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	seen := map[string]struct{}{}
	for _, ms := range sets {
		vs, ws, err := get(r.Context(), q, hints, ms)
		if err != nil {
			return result{err: queryError(err)}
		}
		warnings.Merge(ws)
		for _, v := range vs {
			if _, ok := seen[v]; !ok {
				seen[v] = struct{}{}
				vals = append(vals, v)
			}
		}
	}
	slices.Sort(vals)
	if vals == nil {
		vals = []string{}
	}
	if limit > 0 && len(vals) > limit {
		vals = vals[:limit]
		warnings = warnings.Add(errors.New("results truncated due to limit"))
	}
	return result{
		data:     func(dst []byte) ([]byte, error) { return appendStringArray(dst, vals), nil },
		warnings: warnings,
	}
}

func (a *API) buildInfo(*http.Request) result {
	return result{data: func(dst []byte) ([]byte, error) {
		b, err := json.Marshal(a.opts.BuildInfo)
		return append(dst, b...), err
	}}
}
