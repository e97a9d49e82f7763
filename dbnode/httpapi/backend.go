// Package httpapi is the node's HTTP surface for Prometheus: remote write,
// remote read, health, readiness and metrics. It talks to storage through
// Backend, which a single node implements over its local database and a
// clustered node over the client session.
package httpapi

import (
	"context"
	"errors"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// Backend is where the HTTP layer writes and reads: its read half is the
// query seam's Reader, which the PromQL engine's adapter (promapi) reads
// through without importing this package.
//
// WriteBatch returns a *storage.RejectedError when some samples can never
// be written (the others were), and any other error when the batch should
// be retried.
type Backend interface {
	WriteBatch(ctx context.Context, namespace string, samples []storage.Sample) error
	query.Reader
}

// Local is the Backend of a node serving from its own database.
type Local struct{ DB *storage.Database }

func (l Local) WriteBatch(_ context.Context, ns string, samples []storage.Sample) error {
	return l.DB.WriteBatch(ns, samples)
}

func (l Local) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	return l.DB.Query(ctx, ns, ms, start, end, storage.QueryOptions{})
}

// QueryStreams is Query answering with streams (query.StreamReader).
func (l Local) QueryStreams(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, unsorted bool) ([]storage.SeriesIterator, error) {
	return l.DB.Query(ctx, ns, ms, start, end, storage.QueryOptions{Streams: true, Unsorted: unsorted})
}

func (l Local) LabelNames(_ context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return l.DB.LabelNames(ns, ms, start, end)
}

func (l Local) LabelValues(_ context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return l.DB.LabelValues(ns, name, ms, start, end)
}

// Deferred is a Backend that forwards to whatever backend the API serves
// once storage is open, and answers "not ready" before: other HTTP
// surfaces (the PromQL API) can be mounted before recovery finishes.
type Deferred struct{ API *API }

func (d Deferred) get() (Backend, error) { return d.API.getBackend() }

func (d Deferred) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) error {
	b, err := d.get()
	if err != nil {
		return err
	}
	return b.WriteBatch(ctx, ns, samples)
}

func (d Deferred) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	b, err := d.get()
	if err != nil {
		return nil, err
	}
	return b.Query(ctx, ns, ms, start, end)
}

func (d Deferred) QueryStreams(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, unsorted bool) ([]storage.SeriesIterator, error) {
	b, err := d.get()
	if err != nil {
		return nil, err
	}
	return query.QueryStreams(ctx, b, ns, ms, start, end, unsorted)
}

func (d Deferred) LabelNames(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	b, err := d.get()
	if err != nil {
		return nil, err
	}
	return b.LabelNames(ctx, ns, ms, start, end)
}

func (d Deferred) LabelValues(ctx context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	b, err := d.get()
	if err != nil {
		return nil, err
	}
	return b.LabelValues(ctx, ns, name, ms, start, end)
}

// Push forwards a pushed-down query to the backend when it computes them
// (a cluster session), and declines otherwise: the query then reads raw
// series, as on one node.
func (d Deferred) Push(ctx context.Context, req *query.Request) (*query.Result, error) {
	b, err := d.get()
	if err != nil {
		return nil, err
	}
	if p, ok := b.(query.Pusher); ok {
		return p.Push(ctx, req)
	}
	return nil, query.ErrDeclined
}

// ErrNotReady is returned by a Deferred backend before storage is open.
var ErrNotReady = errNotReady

// HistogramWriter is implemented by a Backend that can store native
// histograms. StoresHistograms reports whether it does now: a cluster
// session does not until histograms reach replicas end to end, and a
// request carrying them is then refused as before, never acknowledged and
// lost. WriteHistograms has WriteBatch's error contract; it fails
// (retryably) if histograms stopped being stored since StoresHistograms
// said yes.
type HistogramWriter interface {
	StoresHistograms() bool
	WriteHistograms(ctx context.Context, namespace string, samples []storage.HistogramSample) error
}

// storesHistograms reports whether b stores native histograms now, and
// returns its writer.
func storesHistograms(b Backend) (HistogramWriter, bool) {
	hw, ok := b.(HistogramWriter)
	return hw, ok && hw.StoresHistograms()
}

func (l Local) StoresHistograms() bool { return true }

// Write writes a batch of every kind through storage's one entry point.
func (l Local) Write(_ context.Context, ns string, b storage.Batch) error {
	return l.DB.Write(ns, b)
}

func (l Local) WriteHistograms(_ context.Context, ns string, samples []storage.HistogramSample) error {
	return l.DB.WriteHistograms(ns, samples)
}

func (d Deferred) StoresHistograms() bool {
	b, err := d.get()
	if err != nil {
		return false
	}
	_, ok := storesHistograms(b)
	return ok
}

func (d Deferred) WriteHistograms(ctx context.Context, ns string, samples []storage.HistogramSample) error {
	b, err := d.get()
	if err != nil {
		return err
	}
	hw, ok := storesHistograms(b)
	if !ok {
		return errHistogramsNotStored
	}
	return hw.WriteHistograms(ctx, ns, samples)
}

// errHistogramsNotStored: the backend stopped storing histograms between
// the decision to accept a request's and their write (a placement change).
// Retryable: the retry is refused whole with 400 if it still does not.
var errHistogramsNotStored = errors.New("native histograms are not stored by this backend any more (placement changed); retry")

// histogramBatch turns a request's decoded histograms into storage
// samples with their series' IDs and shards (known series take them from
// the cache entry).
func (a *API) histogramBatch(out []storage.HistogramSample, hs []remote.Histogram, series []remote.Series, known *hits) []storage.HistogramSample {
	for _, h := range hs {
		s := series[h.Series]
		id := s.ID
		var shard uint32
		if s.Known {
			id, shard = known.id[h.Series], uint32(known.c[h.Series].shard)
		} else {
			shard = ident.Shard(id, a.opts.NumShards)
		}
		out = append(out, storage.HistogramSample{ID: id, Shard: shard, T: h.T, H: h.H, FH: h.FH})
	}
	return out
}

// BatchWriter is a Backend that writes a batch of every kind as one write
// (a cluster session: one fan-out, in which a replica counts toward the
// level once it stored its share of every kind).
type BatchWriter interface {
	Write(ctx context.Context, namespace string, b storage.Batch) error
}

// Write writes a batch of every kind to the backend once it is open.
func (d Deferred) Write(ctx context.Context, ns string, batch storage.Batch) error {
	b, err := d.get()
	if err != nil {
		return err
	}
	return writeAll(ctx, b, ns, batch)
}

// writeAll writes a request's samples of every kind: floats alone by the
// backend's WriteBatch (the hot path), a batch with histograms by its
// Write when it has one, else each kind to its entry point, the outcomes
// joined (storage.JoinWriteErrors). Histograms need a backend that
// stores them now (storesHistograms), which the handlers asked before
// decoding any.
func writeAll(ctx context.Context, b Backend, ns string, batch storage.Batch) error {
	if len(batch.Histograms) == 0 {
		return b.WriteBatch(ctx, ns, batch.Floats)
	}
	if bw, ok := b.(BatchWriter); ok {
		return bw.Write(ctx, ns, batch)
	}
	var ferr error
	if len(batch.Floats) > 0 {
		ferr = b.WriteBatch(ctx, ns, batch.Floats)
	}
	hw, ok := storesHistograms(b)
	if !ok {
		return storage.JoinWriteErrors(ferr, errHistogramsNotStored)
	}
	return storage.JoinWriteErrors(ferr, hw.WriteHistograms(ctx, ns, batch.Histograms))
}

// writeBatch is writeAll returning also how many float and histogram
// samples were written: all of them, all but those refused for good (a
// *storage.RejectedError, which says how many of those are histograms),
// or none on any other error (the sender retries the request whole,
// rewriting is idempotent).
func writeBatch(ctx context.Context, b Backend, ns string, batch storage.Batch) (floats, hists int, err error) {
	err = writeAll(ctx, b, ns, batch)
	var rej *storage.RejectedError
	switch {
	case err == nil:
		return len(batch.Floats), len(batch.Histograms), nil
	case errors.As(err, &rej):
		return max(0, len(batch.Floats)-(rej.Total-rej.Histograms)), max(0, len(batch.Histograms)-rej.Histograms), err
	}
	return 0, 0, err
}
