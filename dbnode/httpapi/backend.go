// Package httpapi is the node's HTTP surface for Prometheus: remote write,
// remote read, health, readiness and metrics. It talks to storage through
// Backend, which a single node implements over its local database and a
// clustered node over the client session.
package httpapi

import (
	"context"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Backend is where the HTTP layer writes and reads.
//
// WriteBatch returns a *storage.RejectedError when some samples can never
// be written (the others were), and any other error when the batch should
// be retried. Query's iterators are owned by the caller.
type Backend interface {
	WriteBatch(ctx context.Context, namespace string, samples []storage.Sample) error
	Query(ctx context.Context, namespace string, matchers []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error)
	LabelNames(ctx context.Context, namespace string, matchers []*labels.Matcher, start, end int64) ([]string, error)
	LabelValues(ctx context.Context, namespace, name string, matchers []*labels.Matcher, start, end int64) ([]string, error)
}

// Local is the Backend of a node serving from its own database.
type Local struct{ DB *storage.Database }

func (l Local) WriteBatch(_ context.Context, ns string, samples []storage.Sample) error {
	return l.DB.WriteBatch(ns, samples)
}

func (l Local) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	return l.DB.Query(ctx, ns, ms, start, end, storage.QueryOptions{})
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

// ErrNotReady is returned by a Deferred backend before storage is open.
var ErrNotReady = errNotReady
