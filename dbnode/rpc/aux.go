package rpc

import (
	"context"
	"fmt"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exemplars and metadata travel between nodes as auxiliary data: the
// coordinator sends a series' exemplars to the owners of its shard and a
// metric's metadata to the owners of the shard of its name, best effort,
// and /api/v1/query_exemplars and /api/v1/metadata ask the owners back.
// A node older than these methods answers Unimplemented.

// ExemplarsWrite stores items on the node and returns how many it stored.
// Consecutive items of one series (the same ID bytes) travel as one entry.
func (c *Client) ExemplarsWrite(ctx context.Context, items []exemplars.Item) (int, error) {
	resp := new(nodepb.ExemplarsWriteResponse)
	if err := c.invoke(ctx, nodepb.Node_ExemplarsWrite_FullMethodName, exemplarsToPB(items), resp); err != nil {
		return 0, err
	}
	return int(resp.GetStored()), nil
}

// ExemplarsQuery returns the node's exemplars in [start, end] of the
// series matching every matcher of any set. A series whose ID does not
// decode is an error: the node sent something it could not have stored.
func (c *Client) ExemplarsQuery(ctx context.Context, start, end int64, sets [][]*labels.Matcher) ([]exemplar.QueryResult, error) {
	req := &nodepb.ExemplarsQueryRequest{Start: start, End: end}
	for _, set := range sets {
		pset := &nodepb.ExemplarMatcherSet{}
		for _, m := range set {
			pset.Matchers = append(pset.Matchers, &nodepb.Matcher{Type: nodepb.MatchType(m.Type), Name: m.Name, Value: m.Value})
		}
		req.MatcherSets = append(req.MatcherSets, pset)
	}
	resp := new(nodepb.ExemplarsQueryResponse)
	if err := c.invoke(ctx, nodepb.Node_ExemplarsQuery_FullMethodName, req, resp); err != nil {
		return nil, err
	}
	out := make([]exemplar.QueryResult, 0, len(resp.GetSeries()))
	for _, ps := range resp.GetSeries() {
		ls, err := ident.Labels(ps.GetId())
		if err != nil {
			return nil, fmt.Errorf("node %s: ExemplarsQuery: series %q: %w", c.addr, ps.GetId(), err)
		}
		r := exemplar.QueryResult{SeriesLabels: ls, Exemplars: make([]exemplar.Exemplar, len(ps.GetExemplars()))}
		for i, pe := range ps.GetExemplars() {
			r.Exemplars[i] = exemplar.Exemplar{Labels: labelsFromPB(pe.GetLabels()), Value: pe.GetValue(), Ts: pe.GetTimestamp(), HasTs: true}
		}
		out = append(out, r)
	}
	return out, nil
}

// MetadataWrite stores metadata records on the node.
func (c *Client) MetadataWrite(ctx context.Context, rs []metadata.Record) error {
	req := &nodepb.MetadataWriteRequest{Entries: make([]*nodepb.MetadataEntry, len(rs))}
	for i, r := range rs {
		req.Entries[i] = &nodepb.MetadataEntry{Metric: r.Metric, Type: string(r.Type), Help: r.Help, Unit: r.Unit}
	}
	return c.invoke(ctx, nodepb.Node_MetadataWrite_FullMethodName, req, new(nodepb.MetadataWriteResponse))
}

// MetadataQuery returns the node's metadata as /api/v1/metadata reads its
// parameters (metadata.Store.Query).
func (c *Client) MetadataQuery(ctx context.Context, metric string, limit, limitPerMetric int) (map[string][]metadata.Entry, error) {
	req := &nodepb.MetadataQueryRequest{Metric: metric, Limit: clampInt32(limit), LimitPerMetric: clampInt32(limitPerMetric)}
	resp := new(nodepb.MetadataQueryResponse)
	if err := c.invoke(ctx, nodepb.Node_MetadataQuery_FullMethodName, req, resp); err != nil {
		return nil, err
	}
	out := map[string][]metadata.Entry{}
	for _, e := range resp.GetEntries() {
		out[e.GetMetric()] = append(out[e.GetMetric()], metadata.Entry{Type: metricType(e.GetType()), Help: e.GetHelp(), Unit: e.GetUnit()})
	}
	return out, nil
}

func clampInt32(v int) int32 {
	switch {
	case v > 1<<31-1:
		return 1<<31 - 1
	case v < -1<<31:
		return -1 << 31
	}
	return int32(v)
}

func exemplarsToPB(items []exemplars.Item) *nodepb.ExemplarsWriteRequest {
	req := &nodepb.ExemplarsWriteRequest{}
	var cur *nodepb.ExemplarSeries
	for i := range items {
		it := &items[i]
		if cur == nil || string(cur.Id) != string(it.SeriesID) {
			cur = &nodepb.ExemplarSeries{Id: it.SeriesID}
			req.Series = append(req.Series, cur)
		}
		cur.Exemplars = append(cur.Exemplars, &nodepb.ExemplarSample{Labels: labelsToPB(it.Labels), Value: it.V, Timestamp: it.T})
	}
	return req
}

func labelsToPB(ls labels.Labels) []*nodepb.ExemplarLabel {
	if ls.IsEmpty() {
		return nil
	}
	out := make([]*nodepb.ExemplarLabel, 0, ls.Len())
	ls.Range(func(l labels.Label) { out = append(out, &nodepb.ExemplarLabel{Name: l.Name, Value: l.Value}) })
	return out
}

func labelsFromPB(pls []*nodepb.ExemplarLabel) labels.Labels {
	var b labels.ScratchBuilder
	for _, l := range pls {
		b.Add(l.GetName(), l.GetValue())
	}
	b.Sort()
	return b.Labels()
}

// metricType keeps a type name as given: Prometheus' API passes types
// through as strings, and a newer node may know a type this one does not.
func metricType(name string) model.MetricType { return model.MetricType(name) }

func (v service) ExemplarsWrite(_ context.Context, req *nodepb.ExemplarsWriteRequest) (*nodepb.ExemplarsWriteResponse, error) {
	st := v.s.opts.Exemplars
	if st == nil {
		return nil, status.Error(codes.Unimplemented, "this node keeps no exemplars")
	}
	var items []exemplars.Item
	for i, ps := range req.GetSeries() {
		// The store decodes a new series' ID and skips one that does not
		// decode; refusing here names the culprit instead.
		if _, err := ident.Labels(ps.GetId()); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "exemplar series %d: %v", i, err)
		}
		for j, pe := range ps.GetExemplars() {
			ls := labelsFromPB(pe.GetLabels())
			if err := exemplars.CheckLabels(ls); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "exemplar series %d, exemplar %d: %v", i, j, err)
			}
			items = append(items, exemplars.Item{SeriesID: ps.GetId(), Labels: ls, V: pe.GetValue(), T: pe.GetTimestamp()})
		}
	}
	return &nodepb.ExemplarsWriteResponse{Stored: uint32(st.Add(items))}, nil
}

func (v service) ExemplarsQuery(_ context.Context, req *nodepb.ExemplarsQueryRequest) (*nodepb.ExemplarsQueryResponse, error) {
	st := v.s.opts.Exemplars
	if st == nil {
		return nil, status.Error(codes.Unimplemented, "this node keeps no exemplars")
	}
	if req.GetStart() > req.GetEnd() {
		return nil, status.Errorf(codes.InvalidArgument, "start %d after end %d", req.GetStart(), req.GetEnd())
	}
	sets := make([][]*labels.Matcher, 0, len(req.GetMatcherSets()))
	for i, ps := range req.GetMatcherSets() {
		ms, err := toMatchers(matchersFromPB(ps.GetMatchers()))
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "matcher set %d: %v", i, status.Convert(err).Message())
		}
		sets = append(sets, ms)
	}
	resp := &nodepb.ExemplarsQueryResponse{}
	size := 0
	for _, r := range st.Select(req.GetStart(), req.GetEnd(), sets...) {
		ps := &nodepb.ExemplarSeries{Id: ident.FromLabels(r.SeriesLabels)}
		for _, e := range r.Exemplars {
			ps.Exemplars = append(ps.Exemplars, &nodepb.ExemplarSample{Labels: labelsToPB(e.Labels), Value: e.Value, Timestamp: e.Ts})
		}
		size += len(ps.Id) + 64*len(ps.Exemplars)
		if size > v.s.opts.MaxMsgSize {
			return nil, status.Errorf(codes.ResourceExhausted, "exemplars answer larger than %d bytes: narrow the query", v.s.opts.MaxMsgSize)
		}
		resp.Series = append(resp.Series, ps)
	}
	return resp, nil
}

func (v service) MetadataWrite(_ context.Context, req *nodepb.MetadataWriteRequest) (*nodepb.MetadataWriteResponse, error) {
	st := v.s.opts.Metadata
	if st == nil {
		return nil, status.Error(codes.Unimplemented, "this node keeps no metadata")
	}
	rs := make([]metadata.Record, 0, len(req.GetEntries()))
	for i, e := range req.GetEntries() {
		if e.GetMetric() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "metadata entry %d: no metric name", i)
		}
		if err := v.s.opts.Limits.CheckMetadata(e.GetMetric(), e.GetHelp(), e.GetUnit()); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "metadata entry %d: %v", i, err)
		}
		rs = append(rs, metadata.Record{Metric: e.GetMetric(), Entry: metadata.Entry{Type: metricType(e.GetType()), Help: e.GetHelp(), Unit: e.GetUnit()}})
	}
	st.AddRecords(rs)
	return &nodepb.MetadataWriteResponse{}, nil
}

func (v service) MetadataQuery(_ context.Context, req *nodepb.MetadataQueryRequest) (*nodepb.MetadataQueryResponse, error) {
	st := v.s.opts.Metadata
	if st == nil {
		return nil, status.Error(codes.Unimplemented, "this node keeps no metadata")
	}
	m := st.Query(req.GetMetric(), int(req.GetLimit()), int(req.GetLimitPerMetric()))
	resp := &nodepb.MetadataQueryResponse{}
	for name, es := range m {
		for _, e := range es {
			resp.Entries = append(resp.Entries, &nodepb.MetadataEntry{Metric: name, Type: string(e.Type), Help: e.Help, Unit: e.Unit})
		}
	}
	return resp, nil
}
