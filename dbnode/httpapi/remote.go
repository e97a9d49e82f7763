package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/retain"
)

func (a *API) remoteWrite(w http.ResponseWriter, r *http.Request) error {
	backend, err := a.getBackend()
	if err != nil {
		return err
	}
	v2, err := negotiate(r)
	if err != nil {
		return err
	}
	bufp := a.getBuf()
	defer a.putBuf(bufp)
	body, err := remote.ReadBody(r.Body, r.ContentLength, a.opts.MaxBodyBytes, *bufp)
	if err != nil {
		return err
	}
	*bufp = body
	st := a.getWriteState()
	defer a.putWriteState(st)
	st.raw, err = remote.DecompressInto(st.raw, body, a.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	if v2 {
		return a.remoteWriteV2(w, r, backend, st) // remotev2.go
	}
	_, hok := storesHistograms(backend)
	st.dec.AcceptHistograms = hok
	a.series.view(func() { err = st.dec.Decode(st.raw) })
	if err != nil {
		st.add = st.add[:0]
		return err
	}
	if err := a.opts.Limits.CheckRequest(len(st.dec.Series), st.dec.NumSamples+len(st.dec.Histograms)); err != nil {
		st.known.clear()
		st.add = st.add[:0]
		return err
	}
	samples := a.batch(st.samples[:0], st.dec.Series, &st.known)
	st.samples = samples
	var hs []storage.HistogramSample
	if len(st.dec.Histograms) > 0 {
		hs = a.histogramBatch(nil, st.dec.Histograms, st.dec.Series, &st.known)
	}
	_, nh, err := writeBatch(r.Context(), backend, a.namespace(r), storage.Batch{Floats: samples, Histograms: hs})
	a.remember(st, a.series, st.dec.Series, st.dec.Keys)
	clear(st.samples) // drop refs and IDs until the next request
	st.known.clear()
	clear(st.add)
	st.add = st.add[:0]
	if rej := (*storage.RejectedError)(nil); err == nil || errors.As(err, &rej) {
		// Written, or written but for samples refused for good (400):
		// either way the request is not retried, so keep the rest.
		a.keepAux(backend, st.dec.Meta, st.dec.Series, st.dec.Exemplars, st.dec.ExemplarPairs)
	}
	if err != nil {
		return err
	}
	a.m.samplesIn.Inc(int64(len(samples) + nh))
	a.m.seriesIn.Inc(int64(len(st.dec.Series)))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// batch appends the samples of decoded series to samples, with each
// series' ID and shard, and its storage ref when the series cache knew it
// (known[i], where series[i].Known).
func (a *API) batch(samples []storage.Sample, series []remote.Series, known *hits) []storage.Sample {
	for i, s := range series {
		id := s.ID
		var shard uint32
		var ref storage.SeriesRef
		if s.Known {
			c := &known.c[i]
			ref, id = c.ref(), known.id[i]
			shard = uint32(c.shard)
		} else {
			shard = ident.Shard(id, a.opts.NumShards)
		}
		for _, smp := range s.Samples {
			samples = append(samples, storage.Sample{ID: id, Shard: shard, Ref: ref, T: smp.T, V: smp.V})
		}
	}
	return samples
}

// remember adds the request's new series to cache, and keeps the storage
// refs the write handed back (storage.Sample.Ref) for the next request. A
// series is remembered even if the write failed: its labels were valid,
// so its ID and shard are right. series and keys are the decoder's.
func (a *API) remember(st *writeState, cache *seriesCache, series []remote.Series, keys []remote.LabelKey) {
	k, hits := 0, 0
	for i, s := range series {
		n := len(s.Samples)
		if n == 0 {
			continue
		}
		ref := st.samples[k+n-1].Ref
		k += n
		switch {
		case s.Known:
			hits++
			if ref != 0 && st.known.ref(i) != ref {
				if u, ok := st.known.refreshed(i, keys[i].Hash, keys[i].Raw, ref); ok {
					st.add = append(st.add, u)
				}
			}
		case s.Keyed:
			key := keys[i]
			st.add = append(st.add, newSeries{h: key.Hash, v: newSlot(key.Hash, key.Raw, s.ID, st.samples[k-1].Shard, ref)})
		}
	}
	cache.update(st.add)
	a.m.cacheHits.Inc(int64(hits))
	a.m.cacheMisses.Inc(int64(len(series) - hits))
}

// getWriteState takes a decoder state from the pool. sync.Pool keeps a
// free list per P, so a request mostly gets a state last used on its own
// core, whose megabytes of buffers are still in that core's cache: a
// shared free list hands them across cores, and every store into a line
// another core holds is a cross-core miss (on the 2-core test VM, Decode's
// stores cost twice as much with a shared list). A GC may drop idle
// states; one survives a GC in the pool's victim cache, so a node under
// steady load keeps its states.
func (a *API) getWriteState() *writeState {
	if st, ok := a.states.Get().(*writeState); ok {
		return st
	}
	return a.newWriteState()
}

// putWriteState pools st for the next request, without the buffers a
// large request grew over retain.MaxBytes (see package retain).
func (a *API) putWriteState(st *writeState) {
	over := st.dec.Release()
	if st.dec2.Release() {
		over = true
	}
	retain.Trim(&over, &st.raw)
	retain.Trim(&over, &st.samples)
	retain.Trim(&over, &st.known.c)
	retain.Trim(&over, &st.known.id)
	retain.Trim(&over, &st.add)
	retain.Trim(&over, &st.known2)
	if over {
		a.release.Dropped()
	}
	a.states.Put(st)
}

// putBuf pools a request body buffer unless it is over retain.MaxBytes.
func (a *API) putBuf(b *[]byte) {
	if _, over := retain.Slice(*b); over {
		a.release.Dropped()
		return
	}
	a.bufs.Put(b)
}

func (a *API) getBuf() *[]byte {
	if b, ok := a.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 64<<10)
	return &b
}

func (a *API) remoteRead(w http.ResponseWriter, r *http.Request) error {
	backend, err := a.getBackend()
	if err != nil {
		return err
	}
	body, err := remote.ReadBody(r.Body, r.ContentLength, a.opts.MaxBodyBytes, nil)
	if err != nil {
		return err
	}
	req, err := remote.DecodeReadRequest(body, a.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	if wantsStreamed(req) {
		return a.remoteReadStreamed(w, r, backend, req)
	}
	resp := &prompb.ReadResponse{Results: make([]*prompb.QueryResult, 0, len(req.Queries))}
	leftOut := 0
	var notes rollupNotes
	for qi, q := range req.Queries {
		ms, err := remote.Matchers(q.Matchers)
		if err != nil {
			return err
		}
		series, err := a.query(r.Context(), r, backend, qi, q, ms, &notes)
		if err = a.damagedSeries(err, &leftOut); err != nil {
			return err
		}
		if err := a.opts.Limits.CheckFetchedSeries(len(series)); err != nil {
			return err
		}
		res := &prompb.QueryResult{Timeseries: make([]*prompb.TimeSeries, 0, len(series))}
		for _, s := range series {
			ts := &prompb.TimeSeries{}
			if err := ident.Range(s.ID, func(n, v []byte) {
				ts.Labels = append(ts.Labels, prompb.Label{Name: string(n), Value: string(v)})
			}); err != nil {
				return err
			}
			// Floats and histograms in one walk, as PromQL and the
			// streamed answer see them (one sample per timestamp;
			// Prometheus' reader merges the two lists by time).
			it := s.Samples()
			for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
				switch vt {
				case chunkenc.ValFloat:
					t, v := it.At()
					ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
				case chunkenc.ValFloatHistogram:
					t, fh := it.AtFloatHistogram(nil)
					ts.Histograms = append(ts.Histograms, prompb.FromFloatHistogram(t, fh))
				default:
					t, ih := it.AtHistogram(nil)
					ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(t, ih))
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
			if len(ts.Samples)+len(ts.Histograms) > 0 {
				res.Timeseries = append(res.Timeseries, ts)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	out, err := remote.EncodeReadResponse(resp)
	if err != nil {
		return err
	}
	setPartialHeader(w, leftOut)
	notes.set(w)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Content-Encoding", "snappy")
	_, err = w.Write(out)
	return err
}

// remoteReadStreamed answers with STREAMED_XOR_CHUNKS frames. Matchers are
// all checked before the first byte, so a bad request still gets a 400;
// an error after streaming started can only cut the stream short.
func (a *API) remoteReadStreamed(w http.ResponseWriter, r *http.Request, backend Backend, req *prompb.ReadRequest) error {
	matchers := make([][]*labels.Matcher, len(req.Queries))
	for i, q := range req.Queries {
		ms, err := remote.Matchers(q.Matchers)
		if err != nil {
			return err
		}
		matchers[i] = ms
	}
	// Every query is run before the first byte, so that one failing (for
	// example on damaged stored data) fails the request with a status
	// instead of ending a 200 stream early, which a client would take for
	// a complete answer.
	results := make([][]storage.SeriesIterator, len(req.Queries))
	leftOut := 0
	var notes rollupNotes
	for i, q := range req.Queries {
		series, err := a.query(r.Context(), r, backend, i, q, matchers[i], &notes)
		err = a.damagedSeries(err, &leftOut)
		if err == nil {
			err = a.opts.Limits.CheckFetchedSeries(len(series))
		}
		if err != nil {
			return err
		}
		results[i] = series
	}
	setPartialHeader(w, leftOut)
	notes.set(w)
	w.Header().Set("Content-Type", StreamedContentType)
	w.WriteHeader(http.StatusOK)
	var buf []byte
	for i, series := range results {
		var err error
		if buf, err = streamSeries(w, i, series, buf); err != nil {
			a.opts.Logger.Warn("remote read stream cut short", "err", err)
			return nil
		}
	}
	return nil
}

// PartialHeader is set on a remote read answer that left out series
// whose stored data is damaged: the number left out. Prometheus' remote
// read protocol has no field for warnings, so this header is the only
// sign a client gets; the node also logs the damage, counts it
// (remote_read_series_damaged, storage's query_series_unreadable) and
// lists it on /ready.
const PartialHeader = "X-Tessera-Partial-Series-Left-Out"

// damagedSeries handles a query's error: a storage.PartialError (some
// series' stored data is damaged) costs only those series, as in PromQL,
// which answers the others with warnings: it is reported and the
// query's other series answered (nil). Other errors are returned.
//
// A 5xx instead would make a Prometheus server reading remotely drop the
// whole answer (it shows a failed remote read as a warning and answers
// from its local data): one damaged page would hide every series of the
// query, which is what the PromQL API already does not do.
func (a *API) damagedSeries(err error, leftOut *int) error {
	var partial *storage.PartialError
	if !errors.As(err, &partial) {
		return err
	}
	*leftOut += len(partial.Damaged)
	a.m.readSeriesDamaged.Inc(int64(len(partial.Damaged)))
	a.opts.Logger.Warn("remote read answered without series whose stored data is damaged",
		"left_out", len(partial.Damaged), "first", partial.Damaged[0].Err)
	lines := make([]string, 0, 1)
	for _, d := range partial.Damaged {
		if len(lines) == maxReportedDamage {
			break // ReportDamage keeps no more
		}
		l := fmt.Sprintf("damaged fileset data met by a read, its series are left out of answers: %v", d.Err)
		if !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	a.ReportDamage(lines...)
	return nil
}

func setPartialHeader(w http.ResponseWriter, leftOut int) {
	if leftOut > 0 {
		w.Header().Set(PartialHeader, strconv.Itoa(leftOut))
	}
}
