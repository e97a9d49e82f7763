package promapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/ident"
)

// TSDBStatus is GET /api/v1/status/tsdb in Prometheus' shape (its
// headStats and the four top lists), computed over the series of the
// block of time holding now (the open block, Tessera's "head"), plus
// Tessera fields: the namespace, the series count per shard for the
// console to add up per node, and the same two counts for every
// namespace of the node's config (the console's per-node, per-namespace
// table).
//
// In a cluster the series come through the backend, the client session:
// its read fan-out asks each shard group's owners at the read level and
// merges the replicas' answers by series ID, so a series held on RF
// nodes counts once. Cost: every series ID of the block crosses the
// network once per replica asked (as /api/v1/series does), which is why
// it is an operator's page, not something to poll every second.
type TSDBStatus struct {
	HeadStats                   HeadStats `json:"headStats"`
	SeriesCountByMetricName     []Stat    `json:"seriesCountByMetricName"`
	LabelValueCountByLabelName  []Stat    `json:"labelValueCountByLabelName"`
	MemoryInBytesByLabelName    []Stat    `json:"memoryInBytesByLabelName"`
	SeriesCountByLabelValuePair []Stat    `json:"seriesCountByLabelValuePair"`
	// Namespace the counts are of.
	Namespace string `json:"namespace"`
	// SeriesCountByShard: shard (decimal) -> series, shards with none left
	// out.
	SeriesCountByShard map[string]int `json:"seriesCountByShard"`
	// Namespaces counts the active series of every configured namespace
	// (Options.Namespaces; the queried one among them, counted once),
	// in config order.
	Namespaces []NamespaceSeries `json:"namespaces,omitempty"`
}

// NamespaceSeries is one namespace's active series (the block of now,
// each series once across replicas) and their count per shard (decimal
// shard -> series, shards with none left out).
type NamespaceSeries struct {
	Namespace          string         `json:"namespace"`
	NumSeries          int            `json:"numSeries"`
	SeriesCountByShard map[string]int `json:"seriesCountByShard"`
}

// HeadStats is Prometheus' headStats: numSeries and numLabelPairs counted,
// minTime and maxTime the open block's bounds (unix ms); chunkCount is
// Prometheus' chunks in memory, which Tessera does not have (0).
type HeadStats struct {
	NumSeries     int   `json:"numSeries"`
	NumLabelPairs int   `json:"numLabelPairs"`
	ChunkCount    int   `json:"chunkCount"`
	MinTime       int64 `json:"minTime"`
	MaxTime       int64 `json:"maxTime"`
}

// Stat is one entry of a top list.
type Stat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// defaultTSDBLimit is Prometheus' default for ?limit=.
const defaultTSDBLimit = 10

// maxTSDBLimit bounds ?limit= (Prometheus' own bound).
const maxTSDBLimit = 10000

func (a *API) tsdbStatus(r *http.Request) result {
	limit := defaultTSDBLimit
	if s := r.FormValue("limit"); s != "" {
		n, err := parseLimit(s)
		if err == nil && (n < 1 || n > maxTSDBLimit) {
			err = fmt.Errorf("limit must be between 1 and %d, got %d", maxTSDBLimit, n)
		}
		if err != nil {
			return result{err: invalidParam(err, "limit")}
		}
		limit = n
	}
	q := a.queryable(r)
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.Timeout)
	defer cancel()
	now := a.opts.Now().UnixMilli()
	ids, shards, err := a.headSeries(ctx, q.ns, now)
	if err != nil {
		return result{err: queryError(err)}
	}
	st, err := ComputeTSDBStatus(ids, shards, limit)
	if err != nil {
		return result{err: &apiError{errorInternal, err}}
	}
	st.Namespace = q.ns
	// The other namespaces cost one more listing each, made one after
	// the other within the same timeout: an operator's page, not a poll.
	for _, ns := range a.opts.Namespaces {
		if ns == q.ns {
			st.Namespaces = append(st.Namespaces, NamespaceSeries{Namespace: ns, NumSeries: st.HeadStats.NumSeries,
				SeriesCountByShard: st.SeriesCountByShard})
			continue
		}
		_, nsShards, err := a.headSeries(ctx, ns, now)
		if err != nil {
			return result{err: queryError(err)}
		}
		st.Namespaces = append(st.Namespaces, NamespaceSeries{Namespace: ns, NumSeries: len(nsShards),
			SeriesCountByShard: countByShard(nsShards)})
	}
	if bs := a.opts.BlockSize; bs > 0 {
		st.HeadStats.MinTime = now - ((now%bs)+bs)%bs
		st.HeadStats.MaxTime = st.HeadStats.MinTime + bs - 1
	}
	return result{data: func(dst []byte) ([]byte, error) {
		b, err := json.Marshal(st)
		return append(dst, b...), err
	}}
}

// headSeries lists the IDs and shards of namespace ns's series in the
// block holding now: the index matches by block, and a one-instant range
// keeps the samples sent with them few.
func (a *API) headSeries(ctx context.Context, ns string, now int64) ([][]byte, []uint32, error) {
	all := []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+")}
	series, err := a.b.Query(ctx, ns, all, now, now)
	if err != nil {
		return nil, nil, fmt.Errorf("list series of namespace %s for tsdb status: %w", ns, err)
	}
	ids := make([][]byte, len(series))
	shards := make([]uint32, len(series))
	for i, s := range series {
		ids[i], shards[i] = s.ID, s.Shard
	}
	return ids, shards, nil
}

// countByShard is shard (decimal) -> how many of shards name it.
func countByShard(shards []uint32) map[string]int {
	out := map[string]int{}
	for _, sh := range shards {
		out[fmt.Sprint(sh)]++
	}
	return out
}

// ComputeTSDBStatus counts series IDs (each once: the caller de-duplicated
// replicas) into the top lists, limit entries each, largest first (ties by
// name). shards[i] is ids[i]'s shard.
func ComputeTSDBStatus(ids [][]byte, shards []uint32, limit int) (TSDBStatus, error) {
	if len(ids) != len(shards) {
		return TSDBStatus{}, errors.New("tsdb status: one shard per series ID needed")
	}
	byName := map[string]uint64{}
	values := map[string]map[string]struct{}{}
	memory := map[string]uint64{}
	pairs := map[string]uint64{}
	var errs []error
	for _, id := range ids {
		err := ident.Range(id, func(n, v []byte) {
			name := string(n)
			if name == labels.MetricName {
				byName[string(v)]++
			}
			vs := values[name]
			if vs == nil {
				vs = map[string]struct{}{}
				values[name] = vs
			}
			if _, seen := vs[string(v)]; !seen {
				vs[string(v)] = struct{}{}
				memory[name] += uint64(len(v))
			}
			pairs[name+"="+string(v)]++
		})
		if err != nil && len(errs) < 3 {
			errs = append(errs, fmt.Errorf("series ID %q: %w", id, err))
		}
	}
	if len(errs) > 0 {
		return TSDBStatus{}, fmt.Errorf("tsdb status: %w", errors.Join(errs...))
	}
	valueCounts := make(map[string]uint64, len(values))
	for n, vs := range values {
		valueCounts[n] = uint64(len(vs))
	}
	return TSDBStatus{
		HeadStats:                   HeadStats{NumSeries: len(ids), NumLabelPairs: len(pairs)},
		SeriesCountByMetricName:     top(byName, limit),
		LabelValueCountByLabelName:  top(valueCounts, limit),
		MemoryInBytesByLabelName:    top(memory, limit),
		SeriesCountByLabelValuePair: top(pairs, limit),
		SeriesCountByShard:          countByShard(shards),
	}, nil
}

// top is m's limit largest entries, largest first, ties by name.
func top(m map[string]uint64, limit int) []Stat {
	out := make([]Stat, 0, len(m))
	for k, v := range m {
		out = append(out, Stat{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Value != out[j].Value {
			return out[i].Value > out[j].Value
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
