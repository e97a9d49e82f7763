package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	otlptranslator "github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/retain"
)

// OTLP/HTTP content types (OTLP specification, "OTLP/HTTP").
const (
	otlpProto = "application/x-protobuf"
	otlpJSON  = "application/json"
)

// otlpSettings translate as Prometheus 3 does with its default OTLP
// configuration (config.DefaultOTLPConfig): underscore escaping with
// type and unit suffixes, no promoted resource attributes (they go to
// target_info only), scope metadata not promoted, cumulative temporality
// only, classic histograms as _bucket/_sum/_count series.
var otlpSettings = func() otlptranslator.Settings {
	c := promconfig.DefaultOTLPConfig
	return otlptranslator.Settings{
		AddMetricSuffixes:                    c.TranslationStrategy.ShouldAddSuffixes(),
		AllowUTF8:                            !c.TranslationStrategy.ShouldEscape(),
		PromoteResourceAttributes:            otlptranslator.NewPromoteResourceAttributes(c),
		KeepIdentifyingResourceAttributes:    c.KeepIdentifyingResourceAttributes,
		ConvertHistogramsToNHCB:              c.ConvertHistogramsToNHCB,
		PromoteScopeMetadata:                 c.PromoteScopeMetadata,
		LabelNameUnderscoreSanitization:      c.LabelNameUnderscoreSanitization,
		LabelNamePreserveMultipleUnderscores: c.LabelNamePreserveMultipleUnderscores,
	}
}()

// otlpState is one OTLP request's working memory, pooled: the
// translator (which keeps a small label name cache) and the appender's
// buffers.
type otlpState struct {
	conv *otlptranslator.PrometheusConverter
	app  otlpAppender
	raw  []byte
}

var otlpStates = sync.Pool{New: func() any { return &otlpState{conv: otlptranslator.NewPrometheusConverter(nil)} }}

// otlpWrite serves POST /api/v1/otlp/v1/metrics: an OTLP
// ExportMetricsServiceRequest (protobuf or JSON, optionally gzip),
// translated to series by Prometheus' own OTLP translator and written
// like remote write. Errors are answered as OTLP/HTTP asks: the status,
// and a google.rpc.Status in the request's encoding.
func (a *API) otlpWrite(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	asJSON, err := a.serveOTLP(w, r)
	a.m.latency("otlp_write").RecordDuration(time.Since(start))
	if err == nil {
		return
	}
	code, reason := classify(err)
	a.m.writeErrors(reason).Inc(1)
	if code >= 500 {
		a.opts.Logger.Warn("request failed", "handler", "otlp_write", "code", code, "err", err)
	}
	writeOTLPStatus(w, asJSON, code, err.Error())
}

func (a *API) serveOTLP(w http.ResponseWriter, r *http.Request) (asJSON bool, err error) {
	asJSON, gz, err := negotiateOTLP(r)
	if err != nil {
		return asJSON, err
	}
	backend, err := a.getBackend()
	if err != nil {
		return asJSON, err
	}
	bufp := a.getBuf()
	defer a.putBuf(bufp)
	body, err := remote.ReadBody(r.Body, r.ContentLength, a.opts.MaxBodyBytes, *bufp)
	if err != nil {
		return asJSON, err
	}
	*bufp = body
	st := otlpStates.Get().(*otlpState)
	defer func() {
		over := st.app.oversized() || cap(st.raw) > retain.MaxBytes
		st.app.reset()
		st.conv.Reset(nil)
		if over {
			// The converter's own tables grew with the request too: the
			// whole state goes (see package retain).
			a.release.Dropped()
			return
		}
		otlpStates.Put(st)
	}()
	if gz {
		if st.raw, err = gunzip(st.raw[:0], body, a.opts.MaxBodyBytes); err != nil {
			return asJSON, err
		}
		body = st.raw
	}
	req, err := decodeOTLP(body, asJSON)
	if err != nil {
		return asJSON, err
	}
	md := req.Metrics()
	_, hok := storesHistograms(backend)
	rejected, reason, why := refuseUnstoredOTLP(md, hok)
	app := &st.app
	app.numShards = a.opts.NumShards
	app.acceptHist = hok
	st.conv.Reset(app)
	annots, err := st.conv.FromMetrics(r.Context(), md, otlpSettings)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return asJSON, err // 503: retry
		}
		return asJSON, &remote.InputError{Msg: "translating OTLP metrics (nothing was written): " + err.Error()}
	}
	if err := app.resolve(a.seriesV2, a.opts.Limits.CheckID); err != nil {
		return asJSON, err
	}
	if app.histograms > 0 { // none expected: exponential histograms were taken out
		rejected += int64(app.histograms)
		reason = remote.ReasonHistograms
		why = append(why, fmt.Sprintf("%d native histogram samples of %s not written: this node does not store native histograms yet", app.histograms, app.firstHistogram))
	}
	if err := a.opts.Limits.CheckRequest(len(app.series), len(app.samples)+len(app.hists)); err != nil {
		return asJSON, err
	}
	if len(app.samples) > 0 || len(app.hists) > 0 {
		err := writeAll(r.Context(), backend, a.namespace(r), tstorage.Batch{Floats: app.samples, Histograms: app.hists})
		app.remember(a)
		if rej := (*tstorage.RejectedError)(nil); err != nil && !errors.As(err, &rej) {
			return asJSON, err // nothing acknowledged: 503, the sender retries
		}
		// Written, or written but for samples refused for good (400, as
		// remote write answers it): either way the request is not
		// retried, so keep its metadata and exemplars.
		a.keepAux(backend, app.meta, nil, nil, nil)
		a.keepExemplars(backend, app.exemplars)
		if err != nil {
			return asJSON, err
		}
	}
	a.m.samplesIn.Inc(int64(len(app.samples) + len(app.hists)))
	a.m.seriesIn.Inc(int64(len(app.series)))
	if rejected > 0 && len(app.samples)+len(app.hists) == 0 {
		// Nothing of the request was stored: a plain refusal.
		return asJSON, &remote.InputError{Reason: reason, Msg: strings.Join(why, "; ")}
	}
	if rejected > 0 {
		a.m.writeErrors(reason).Inc(1) // a partial success: counted as a refusal too
	}
	resp := pmetricotlp.NewExportResponse()
	var warn []string
	if app.badExemplars > 0 {
		warn = append(warn, fmt.Sprintf("%d exemplars not stored: %s", app.badExemplars, app.firstBadExemplar))
	}
	if ws, _ := annots.AsStrings("", 0, 0); len(ws) > 0 {
		warn = append(warn, ws...)
	}
	if rejected > 0 || len(warn) > 0 {
		ps := resp.PartialSuccess()
		ps.SetRejectedDataPoints(rejected)
		ps.SetErrorMessage(strings.Join(append(why, warn...), "; "))
	}
	return asJSON, writeOTLPResponse(w, asJSON, resp)
}

// negotiateOTLP reads the body's encoding from Content-Type and
// Content-Encoding: 415 for what OTLP/HTTP does not define.
func negotiateOTLP(r *http.Request) (asJSON, gz bool, err error) {
	ct := r.Header.Get("Content-Type")
	media, _, perr := mime.ParseMediaType(ct)
	switch {
	case perr == nil && media == otlpProto:
	case perr == nil && media == otlpJSON:
		asJSON = true
	default:
		return false, false, &unsupportedMediaError{fmt.Sprintf("unsupported Content-Type %q: OTLP/HTTP bodies are %s or %s", ct, otlpProto, otlpJSON)}
	}
	switch enc := r.Header.Get("Content-Encoding"); {
	case enc == "", strings.EqualFold(enc, "identity"):
	case strings.EqualFold(enc, "gzip"):
		gz = true
	default:
		return asJSON, false, &unsupportedMediaError{fmt.Sprintf("unsupported Content-Encoding %q: OTLP/HTTP bodies are gzip or not compressed", enc)}
	}
	return asJSON, gz, nil
}

// gunzip decompresses b into dst, refusing output over maxBytes (a small
// body can inflate a thousandfold).
func gunzip(dst, b []byte, maxBytes int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, &remote.InputError{Msg: "bad gzip body: " + err.Error()}
	}
	buf := bytes.NewBuffer(dst)
	n, err := buf.ReadFrom(io.LimitReader(zr, maxBytes+1))
	if err != nil {
		return nil, &remote.InputError{Msg: "bad gzip body: " + err.Error()}
	}
	if n > maxBytes {
		return nil, &remote.TooLargeError{Size: n, Limit: maxBytes}
	}
	return buf.Bytes(), nil
}

// decodeOTLP decodes an ExportMetricsServiceRequest.
func decodeOTLP(body []byte, asJSON bool) (pmetricotlp.ExportRequest, error) {
	req := pmetricotlp.NewExportRequest()
	var err error
	if asJSON {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		enc := "protobuf"
		if asJSON {
			enc = "JSON"
		}
		return req, &remote.InputError{Msg: fmt.Sprintf("bad OTLP %s ExportMetricsServiceRequest: %v", enc, err)}
	}
	return req, nil
}

// refuseUnstoredOTLP takes out of md the metrics this node does not store
// and returns how many data points they had, the reason (for
// remote_write_errors) and why each kind was not stored: exponential histograms (Prometheus makes native histograms of
// them, not stored yet) and sums and histograms not of cumulative
// temporality (Prometheus refuses them too unless told to store deltas
// as they are). Empty metrics (no type) carry nothing and are dropped.
//
// With keepHistograms (a backend that stores native histograms) exponential
// histograms stay in and are stored.
func refuseUnstoredOTLP(md pmetric.Metrics, keepHistograms bool) (rejected int64, reason string, why []string) {
	var nExp, nDelta, nFuture int64
	var firstExp, firstDelta, firstFuture string
	var firstFutureT uint64
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			sms.At(j).Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if n, first := dropUnrepresentableTimes(m); n > 0 {
					if nFuture == 0 {
						firstFuture, firstFutureT = m.Name(), first
					}
					nFuture += n
					if dataPoints(m) == 0 {
						return true // nothing left: no "empty data points" warning
					}
				}
				switch m.Type() {
				case pmetric.MetricTypeEmpty:
					return true
				case pmetric.MetricTypeExponentialHistogram:
					if keepHistograms {
						if m.ExponentialHistogram().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
							if nDelta == 0 {
								firstDelta = m.Name()
							}
							nDelta += int64(m.ExponentialHistogram().DataPoints().Len())
							return true
						}
						return false
					}
					if nExp == 0 {
						firstExp = m.Name()
					}
					nExp += int64(m.ExponentialHistogram().DataPoints().Len())
					return true
				case pmetric.MetricTypeSum:
					if m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
						if nDelta == 0 {
							firstDelta = m.Name()
						}
						nDelta += int64(m.Sum().DataPoints().Len())
						return true
					}
				case pmetric.MetricTypeHistogram:
					if m.Histogram().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
						if nDelta == 0 {
							firstDelta = m.Name()
						}
						nDelta += int64(m.Histogram().DataPoints().Len())
						return true
					}
				}
				return false
			})
		}
	}
	if nDelta > 0 {
		reason = reasonDelta
	}
	if nExp > 0 {
		reason = remote.ReasonHistograms
		why = append(why, fmt.Sprintf("%d exponential histogram data points (first of metric %q) not written: Prometheus stores them as native histograms, which this node does not store yet; configure the SDK or collector to send explicit-bucket histograms", nExp, firstExp))
	}
	if nDelta > 0 {
		why = append(why, fmt.Sprintf("%d data points of sums or histograms without cumulative temporality (first of metric %q) not written: only cumulative temporality is stored, as Prometheus does by default; use the collector's deltatocumulative processor", nDelta, firstDelta))
	}
	if nFuture > 0 {
		reason = tstorage.ReasonTooFarFuture.String()
		why = append(why, fmt.Sprintf("%d data points (first of metric %q, timeUnixNano %d) not written: past the latest time a sample can have (%s, int64 nanoseconds since the Unix epoch)",
			nFuture, firstFuture, firstFutureT, time.Unix(0, math.MaxInt64).UTC().Format(time.RFC3339)))
	}
	return nExp + nDelta + nFuture, reason, why
}

// dataPoints is how many data points m holds.
func dataPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// dropUnrepresentableTimes removes m's data points whose timeUnixNano is
// past math.MaxInt64 and returns how many it removed and the first such
// time. The translator converts the uint64 to int64 milliseconds, which
// turns such a time (MaxUint64: "no time" to some senders) into one at or
// before 1970, refused then as a sample 56 years old: a message naming
// neither the field nor the value sent.
func dropUnrepresentableTimes(m pmetric.Metric) (n int64, first uint64) {
	bad := func(ts pcommon.Timestamp) bool {
		if uint64(ts) <= math.MaxInt64 {
			return false
		}
		if n == 0 {
			first = uint64(ts)
		}
		n++
		return true
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		m.Gauge().DataPoints().RemoveIf(func(p pmetric.NumberDataPoint) bool { return bad(p.Timestamp()) })
	case pmetric.MetricTypeSum:
		m.Sum().DataPoints().RemoveIf(func(p pmetric.NumberDataPoint) bool { return bad(p.Timestamp()) })
	case pmetric.MetricTypeHistogram:
		m.Histogram().DataPoints().RemoveIf(func(p pmetric.HistogramDataPoint) bool { return bad(p.Timestamp()) })
	case pmetric.MetricTypeExponentialHistogram:
		m.ExponentialHistogram().DataPoints().RemoveIf(func(p pmetric.ExponentialHistogramDataPoint) bool { return bad(p.Timestamp()) })
	case pmetric.MetricTypeSummary:
		m.Summary().DataPoints().RemoveIf(func(p pmetric.SummaryDataPoint) bool { return bad(p.Timestamp()) })
	}
	return n, first
}

// reasonDelta counts in remote_write_errors the refusals of data points
// of delta (or unspecified) temporality.
const reasonDelta = "delta_temporality"

// writeOTLPResponse answers 200 with an ExportMetricsServiceResponse in
// the request's encoding.
func writeOTLPResponse(w http.ResponseWriter, asJSON bool, resp pmetricotlp.ExportResponse) error {
	var b []byte
	var err error
	ct := otlpProto
	if asJSON {
		b, err = resp.MarshalJSON()
		ct = otlpJSON
	} else {
		b, err = resp.MarshalProto()
	}
	if err != nil {
		return fmt.Errorf("encode OTLP response: %w", err)
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

// writeOTLPStatus answers an error as OTLP/HTTP asks: the status code and
// a google.rpc.Status whose message says what is wrong.
func writeOTLPStatus(w http.ResponseWriter, asJSON bool, code int, msg string) {
	s := &status.Status{Code: int32(grpcCode(code)), Message: msg}
	var b []byte
	ct := otlpProto
	if asJSON {
		b, _ = protojson.Marshal(s)
		ct = otlpJSON
	} else {
		b, _ = proto.Marshal(s)
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// grpcCode maps an HTTP status to the google.rpc.Code it stands for.
func grpcCode(code int) int {
	switch code {
	case http.StatusBadRequest:
		return 3 // INVALID_ARGUMENT
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return 8 // RESOURCE_EXHAUSTED
	case http.StatusUnsupportedMediaType:
		return 12 // UNIMPLEMENTED
	case http.StatusServiceUnavailable:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}

// otlpAppender is the storage.AppenderV2 the translator appends to: it
// collects float samples into one batch with canonical series IDs, the
// metadata of each metric family and the exemplars. It stores nothing
// itself: resolve then checks the series, and the handler writes the
// batch through the Backend, as remote write does; Commit and Rollback do
// nothing.
type otlpAppender struct {
	numShards uint32

	idBuf []byte
	// arena holds the IDs of the request's series. A series' ID slices
	// the arena as it was then: when the arena grows, earlier IDs keep
	// slicing the old array, which nothing writes again.
	arena    []byte
	ids      map[string]int // index in series
	series   []otlpSeries
	promote  []newSeries
	samples  []tstorage.Sample
	ofSample []int32 // index in series of each sample
	// acceptHist: the backend stores native histograms; they are
	// collected in hists (ofHist: their series) instead of counted.
	acceptHist bool
	hists      []tstorage.HistogramSample
	ofHist     []int32
	meta       []remote.Metadata
	metaSeen   map[string]struct{}
	exemplars  []exemplars.Item

	histograms       int
	firstHistogram   string
	badExemplars     int
	firstBadExemplar string
}

// otlpSeries is one series of a request: its ID, KeyHash and last
// sample, then (resolve) its shard, cache entry (nil for a series the
// cache did not know) and storage ref.
type otlpSeries struct {
	id    []byte
	hash  uint64
	last  int
	shard uint32
	e     slot // found() if the cache knew the series
	ref   tstorage.SeriesRef
}

// resolve looks the request's series up by ID in the API's ID-keyed
// series cache (remote write 2.0's: an ID is the same series whichever
// protocol brought it, checked by the same rules), in one view after the
// translation (not around it: a long translation would hold the lock
// that other requests' updates wait for). A known series skips the label
// check, the shard hash and, on this node's storage, the series lookup;
// the others are checked with check (limits.CheckID: Prometheus' label
// rules and the label limits), the first failure refusing the request
// whole, as remote write does. It then sets every sample's shard and ref.
func (a *otlpAppender) resolve(cache *seriesCache, check func(id []byte) error) error {
	cache.view(func() {
		for i := range a.series {
			s := &a.series[i]
			var promote bool
			if s.e, promote = cache.lookupOne(s.id, s.hash); promote {
				a.promote = append(a.promote, newSeries{h: s.hash, v: s.e})
			}
		}
	})
	for i := range a.series {
		s := &a.series[i]
		if s.e.found() {
			s.shard = uint32(s.e.shard)
			s.ref, _ = s.e.load()
			continue
		}
		if err := check(s.id); err != nil {
			return &remote.InputError{Msg: fmt.Sprintf("translated series refused: %v; nothing was written", err), Err: err}
		}
		s.shard = ident.Shard(s.id, a.numShards)
	}
	for k := range a.samples {
		s := &a.series[a.ofSample[k]]
		a.samples[k].Shard, a.samples[k].Ref = s.shard, s.ref
	}
	for k := range a.hists {
		a.hists[k].Shard = a.series[a.ofHist[k]].shard
	}
	return nil
}

func (a *otlpAppender) reset() {
	clear(a.ids)
	clear(a.metaSeen)
	clear(a.series)
	clear(a.promote)
	clear(a.samples)
	clear(a.meta)
	clear(a.exemplars)
	clear(a.hists)
	*a = otlpAppender{idBuf: a.idBuf[:0], arena: a.arena[:0], ids: a.ids, series: a.series[:0], promote: a.promote[:0],
		samples: a.samples[:0], ofSample: a.ofSample[:0], meta: a.meta[:0], metaSeen: a.metaSeen, exemplars: a.exemplars[:0],
		hists: a.hists[:0], ofHist: a.ofHist[:0]}
}

// oversized reports whether a buffer of a grew over retain.MaxBytes.
func (a *otlpAppender) oversized() bool {
	var over bool
	for _, n := range []int{cap(a.idBuf), cap(a.arena), retain.Bytes(a.series), retain.Bytes(a.promote),
		retain.Bytes(a.samples), retain.Bytes(a.hists), retain.Bytes(a.meta), retain.Bytes(a.exemplars), len(a.ids) * 32} {
		over = over || n > retain.MaxBytes
	}
	return over
}

// remember puts the request's new series into the cache with the storage
// refs the write handed back, and refreshes the refs of known ones, as
// remote write does.
func (a *otlpAppender) remember(api *API) {
	add, hits := a.promote, 0
	for _, s := range a.series {
		var ref tstorage.SeriesRef
		if s.last >= 0 { // a series with histograms only has none
			ref = a.samples[s.last].Ref
		}
		if s.e.found() {
			hits++
			if u, ok := s.e.refreshed(s.hash, ref); ok {
				add = append(add, u)
			}
			continue
		}
		add = append(add, newSeries{h: s.hash, v: newSlot(s.hash, s.id, s.id, s.shard, ref)})
	}
	a.promote = add
	api.seriesV2.update(add)
	api.m.cacheHits.Inc(int64(hits))
	api.m.cacheMisses.Inc(int64(len(a.series) - hits))
}

var metricTypes = map[model.MetricType]int32{model.MetricTypeUnknown: 0, model.MetricTypeCounter: 1,
	model.MetricTypeGauge: 2, model.MetricTypeHistogram: 3, model.MetricTypeGaugeHistogram: 4,
	model.MetricTypeSummary: 5, model.MetricTypeInfo: 6, model.MetricTypeStateset: 7}

// Append implements storage.AppenderV2.
func (a *otlpAppender) Append(_ storage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AppendV2Options) (storage.SeriesRef, error) {
	if (h != nil || fh != nil) && !a.acceptHist {
		if a.histograms == 0 {
			a.firstHistogram = ls.String()
		}
		a.histograms++
		return 0, nil
	}
	a.idBuf = a.idBuf[:0]
	ls.Range(func(l labels.Label) {
		// The canonical ID (ident.AppendSortedPairs' encoding): labels
		// come sorted by name. An empty value is no label, as in
		// Prometheus (ident.WithoutEmpty).
		if l.Value == "" {
			return
		}
		a.idBuf = binary.AppendUvarint(a.idBuf, uint64(len(l.Name)))
		a.idBuf = append(a.idBuf, l.Name...)
		a.idBuf = binary.AppendUvarint(a.idBuf, uint64(len(l.Value)))
		a.idBuf = append(a.idBuf, l.Value...)
	})
	if a.ids == nil {
		a.ids = make(map[string]int)
		a.metaSeen = make(map[string]struct{})
	}
	i, ok := a.ids[string(a.idBuf)]
	if !ok {
		from := len(a.arena)
		a.arena = append(a.arena, a.idBuf...)
		i = len(a.series)
		a.series = append(a.series, otlpSeries{id: a.arena[from:len(a.arena):len(a.arena)], hash: remote.KeyHash(a.idBuf), last: -1})
		a.ids[string(a.idBuf)] = i
	}
	s := &a.series[i]
	if h != nil || fh != nil {
		// Copied: the write happens after the translation, and the
		// appender contract does not promise the histogram stays as is.
		if h != nil {
			h = h.Copy()
		} else {
			fh = fh.Copy()
		}
		a.hists = append(a.hists, tstorage.HistogramSample{ID: s.id, T: t, H: h, FH: fh})
		a.ofHist = append(a.ofHist, int32(i))
	} else {
		s.last = len(a.samples)
		a.samples = append(a.samples, tstorage.Sample{ID: s.id, T: t, V: v})
		a.ofSample = append(a.ofSample, int32(i))
	}
	if name := opts.MetricFamilyName; name != "" {
		if _, ok := a.metaSeen[name]; !ok {
			a.metaSeen[name] = struct{}{}
			a.meta = append(a.meta, remote.Metadata{Series: -1, Type: metricTypes[opts.Metadata.Type],
				Name: []byte(name), Unit: []byte(opts.Metadata.Unit), Help: []byte(opts.Metadata.Help)})
		}
	}
	for _, e := range opts.Exemplars {
		if err := exemplarOK(e.Labels); err != nil {
			if a.badExemplars == 0 {
				a.firstBadExemplar = fmt.Sprintf("exemplar of series %s: %v", ls.String(), err)
			}
			a.badExemplars++
			continue
		}
		a.exemplars = append(a.exemplars, exemplars.Item{SeriesID: s.id, Labels: e.Labels, V: e.Value, T: e.Ts})
	}
	return storage.SeriesRef(i + 1), nil
}

// exemplarOK applies OpenMetrics' exemplar label bound, as Prometheus'
// exemplar storage does: at most 128 UTF-8 characters of names and values.
func exemplarOK(ls labels.Labels) error {
	n := 0
	ls.Range(func(l labels.Label) { n += utf8.RuneCountInString(l.Name) + utf8.RuneCountInString(l.Value) })
	if n > 128 {
		return fmt.Errorf("labels are %d UTF-8 characters long, over the limit of 128", n)
	}
	return nil
}

func (a *otlpAppender) Commit() error   { return nil }
func (a *otlpAppender) Rollback() error { return nil }

var _ storage.AppenderV2 = (*otlpAppender)(nil)
