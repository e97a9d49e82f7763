package httpapi

import (
	"context"
	"time"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/ident"
)

// AuxBackend is a Backend that also carries exemplars and metadata
// through the cluster (client.Session). Writes are handed over without
// waiting, best effort: they never fail or slow a sample write. Queries
// answer what the nodes that answered hold, with a warning per node that
// did not. A Backend without it (Local, tests) keeps them in this node's
// stores.
type AuxBackend interface {
	// WriteExemplars returns how many of items it took (kept or queued).
	WriteExemplars(items []exemplars.Item) int
	WriteMetadata(rs []metadata.Record)
	QueryExemplars(ctx context.Context, start, end int64, sets [][]*labels.Matcher) ([]exemplar.QueryResult, []string, error)
	QueryMetadata(ctx context.Context, metric string, limit, limitPerMetric int) (map[string][]metadata.Entry, []string, error)
}

// metadataResendEvery is how often a coordinator forwards metadata it
// has already forwarded unchanged (metadata.Resend): Prometheus 1.0
// senders resend it every minute, so an owner that missed it (down)
// has it again within one such period.
const metadataResendEvery = time.Minute

// Exemplars is the node's exemplar store, for /api/v1/query_exemplars.
func (a *API) Exemplars() *exemplars.Store { return a.ex }

// Metadata is the node's metadata store.
func (a *API) Metadata() *metadata.Store { return a.meta }

// QueryExemplars answers /api/v1/query_exemplars (promapi.Exemplars):
// from the cluster when the backend carries exemplars, else from this
// node's store.
func (a *API) QueryExemplars(ctx context.Context, start, end int64, sets [][]*labels.Matcher) ([]exemplar.QueryResult, []string, error) {
	if b, err := a.getBackend(); err == nil {
		if ab, ok := b.(AuxBackend); ok {
			return ab.QueryExemplars(ctx, start, end, sets)
		}
	}
	return a.ex.Select(start, end, sets...), nil, nil
}

// keepAux hands a written request's metadata and exemplars to the cluster
// (AuxBackend) or to this node's stores, and returns how many exemplars
// were kept. Each exemplar's series is series[e.Series]: the decoders
// decode a series carrying exemplars in full, so its ID is set.
func (a *API) keepAux(b Backend, ms []remote.Metadata, series []remote.Series, exs []remote.Exemplar, pairs []ident.Pair) int {
	ab, cluster := b.(AuxBackend)
	ms = a.dropLongMetadata(ms)
	if len(ms) > 0 {
		if cluster {
			if rs := a.resend.Due(ms, time.Now(), nil); len(rs) > 0 {
				ab.WriteMetadata(rs)
			}
		} else {
			a.meta.Add(ms)
		}
	}
	if len(exs) == 0 {
		return 0
	}
	items := make([]exemplars.Item, 0, len(exs))
	var lb labels.ScratchBuilder
	for _, e := range exs {
		id := series[e.Series].ID
		if id == nil {
			continue
		}
		lb.Reset()
		for _, p := range pairs[e.From:e.To] {
			lb.Add(string(p.Name), string(p.Value))
		}
		lb.Sort()
		ls := lb.Labels()
		if err := exemplars.CheckLabels(ls); err != nil {
			// Prometheus' remote write receiver drops such an exemplar
			// and stores the samples; node RPC would refuse it.
			a.m.writeErrors("exemplar_labels_too_long").Inc(1)
			continue
		}
		items = append(items, exemplars.Item{SeriesID: id, Labels: ls, V: e.V, T: e.T})
	}
	return a.keepExemplars(b, items)
}

// dropLongMetadata removes from ms (in place) the records over
// limits.maxMetadataLength, counting each refusal: metadata is best
// effort and never fails a write, but a record the owners' node RPC
// refuses must not travel (it would fail the whole forwarded batch).
func (a *API) dropLongMetadata(ms []remote.Metadata) []remote.Metadata {
	maxLen := a.opts.Limits.Config().MaxMetadataLength
	if maxLen <= 0 {
		return ms
	}
	out := ms[:0]
	for _, m := range ms {
		if len(m.Name) <= maxLen && len(m.Help) <= maxLen && len(m.Unit) <= maxLen {
			out = append(out, m)
			continue
		}
		if err := a.opts.Limits.CheckMetadata(string(m.Name), string(m.Help), string(m.Unit)); err != nil {
			continue
		}
		out = append(out, m)
	}
	return out
}

// keepExemplars is keepAux's exemplar half, for items already built.
func (a *API) keepExemplars(b Backend, items []exemplars.Item) int {
	var n int
	if ab, ok := b.(AuxBackend); ok {
		n = ab.WriteExemplars(items) // handed over: best effort from here
	} else {
		n = a.ex.Add(items)
	}
	a.m.exemplarsIn.Inc(int64(n))
	return n
}
