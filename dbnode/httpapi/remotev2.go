package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Remote write protocol messages, as named by the proto parameter of the
// Content-Type (remote write 2.0 spec, "Content negotiation").
const (
	protoV1 = "prometheus.WriteRequest"
	protoV2 = "io.prometheus.write.v2.Request"

	// ContentTypeV2 is the Content-Type of a remote write 2.0 request.
	ContentTypeV2 = "application/x-protobuf;proto=" + protoV2

	headerSamplesWritten    = "X-Prometheus-Remote-Write-Samples-Written"
	headerHistogramsWritten = "X-Prometheus-Remote-Write-Histograms-Written"
	headerExemplarsWritten  = "X-Prometheus-Remote-Write-Exemplars-Written"
)

// unsupportedMediaError is a request in a protocol or encoding this node
// does not speak: 415, so that a 2.0 sender falls back to 1.0.
type unsupportedMediaError struct{ msg string }

func (e *unsupportedMediaError) Error() string { return e.msg }

// negotiate reads which remote write message the request carries from its
// Content-Type, and checks its Content-Encoding. No Content-Type, or
// application/x-protobuf without proto, is 1.0 (what 1.0 senders send);
// anything else we do not speak is a 415 naming what we do.
func negotiate(r *http.Request) (v2 bool, err error) {
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "snappy") {
		return false, &unsupportedMediaError{fmt.Sprintf("unsupported Content-Encoding %q: remote write bodies must be snappy (block format)", enc)}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false, nil
	}
	media, params, err := mime.ParseMediaType(ct)
	if err != nil || media != "application/x-protobuf" {
		return false, &unsupportedMediaError{fmt.Sprintf("unsupported Content-Type %q: want application/x-protobuf;proto=%s (remote write 1.0) or %s (2.0)", ct, protoV1, ContentTypeV2)}
	}
	switch params["proto"] {
	case "", protoV1:
		return false, nil
	case protoV2:
		return true, nil
	}
	return false, &unsupportedMediaError{fmt.Sprintf("unsupported remote write message proto=%q: this node speaks %s (1.0) and %s (2.0)", params["proto"], protoV1, protoV2)}
}

// remoteWriteV2 writes a decompressed remote write 2.0 request. Its float
// samples are written like 1.0's (through a series cache keyed by ID: a
// 2.0 request's label references mean nothing outside it; a series is
// found by its label strings, lookupV2, and only a miss has its ID built), its native
// histograms after them when the backend stores them, metadata and
// exemplars kept in the node's stores. With a backend that does not store
// histograms, a request carrying them has the rest written and is
// answered 400 naming them, with the written-count headers saying exactly
// what was written, as the 2.0 spec asks of a partial write (the sender
// does not retry a 4xx, and knows from the headers what was lost).
func (a *API) remoteWriteV2(w http.ResponseWriter, r *http.Request, backend Backend, st *writeState) error {
	d := &st.dec2
	written := func(samples, histograms, exemplars int) {
		h := w.Header()
		h.Set(headerSamplesWritten, strconv.Itoa(samples))
		h.Set(headerHistogramsWritten, strconv.Itoa(histograms))
		h.Set(headerExemplarsWritten, strconv.Itoa(exemplars))
	}
	written(0, 0, 0)
	_, hok := storesHistograms(backend)
	d.AcceptHistograms = hok
	if err := d.Decode(st.raw); err != nil {
		return err
	}
	if err := a.opts.Limits.CheckRequest(len(d.Series), d.NumSamples+d.NumHistograms); err != nil {
		return err
	}
	st.known2 = slices.Grow(st.known2[:0], len(d.Keys))[:len(d.Keys)]
	known := st.known2
	clear(known)
	st.known.reset(len(d.Keys))
	a.seriesV2.view(func() { st.add = a.seriesV2.lookupV2(d, known, &st.known, st.add[:0]) })
	// The decoder left the IDs and the label checks to us (DeferIDs,
	// DeferLabelChecks): a series the cache knows has its ID from the
	// cache and passed the checks when it was first written.
	for i, k := range known {
		if !k {
			d.BuildID(i)
			if err := d.CheckSeries(i); err != nil {
				st.known.clear()
				clear(st.add)
				st.add = st.add[:0]
				return err
			}
		}
	}
	for i := range d.Series {
		d.Series[i].Known = known[i]
	}
	samples := a.batch(st.samples[:0], d.Series, &st.known)
	st.samples = samples
	var hs []storage.HistogramSample
	if hok && len(d.Histograms) > 0 {
		hs = a.histogramBatch(nil, d.Histograms, d.Series, &st.known)
	}
	var n, nh int
	var err error
	if len(samples) > 0 || len(hs) > 0 {
		n, nh, err = writeBatch(r.Context(), backend, a.namespace(r), storage.Batch{Floats: samples, Histograms: hs})
	}
	a.remember(st, a.seriesV2, d.Series, d.Keys)
	clear(st.samples)
	st.known.clear()
	clear(st.add)
	st.add = st.add[:0]
	if rej := (*storage.RejectedError)(nil); err != nil && !errors.As(err, &rej) {
		return err // nothing acknowledged: the sender retries the request whole
	}
	written(n, nh, a.keepAux(backend, d.Meta, d.Series, d.Exemplars, d.ExemplarPairs))
	a.m.samplesIn.Inc(int64(n + nh))
	a.m.seriesIn.Inc(int64(len(d.Series)))
	if !hok {
		err = errors.Join(err, refuseUnstoredV2(d))
	}
	if err != nil {
		return err // 400: the headers say what was written
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refuseUnstoredV2 names what a decoded 2.0 request carried that is not
// stored (native histograms), or returns nil.
func refuseUnstoredV2(d *remote.WriteDecoderV2) error {
	if d.NumHistograms == 0 {
		return nil
	}
	return &remote.InputError{Reason: remote.ReasonHistograms, Msg: fmt.Sprintf(
		"%d native histogram samples (first in timeseries %d) not written: not supported yet (this node does not store them); the float samples and exemplars were written (see %s and %s)",
		d.NumHistograms, d.FirstHistogram, headerSamplesWritten, headerExemplarsWritten)}
}
