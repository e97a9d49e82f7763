package promapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

// TestMetadataMatchesPrometheus checks /series, /labels and
// /label/<name>/values against the reference storage's answers.
func TestMetadataMatchesPrometheus(t *testing.T) {
	node, ref, d := loadedNode(t)
	min := func(m int64) string { return fmtTime(d.start+m*60*1000, m%2 == 0) }
	p := parser.NewParser(parser.Options{})

	// wantSeries is the union of series matching any selector with a
	// sample in [mint, maxt], sorted by labels.
	wantSeries := func(sels []string, mint, maxt int64) []string {
		var out []string
		for _, sel := range sels {
			ms, err := p.ParseMetricSelector(sel)
			require.NoError(t, err)
			q, _ := ref.Querier(mint, maxt)
			for _, s := range q.(*refQuerier).matching(ms, mint, maxt) {
				out = append(out, s.lset.String())
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	wantLabels := func(name string, sels []string) []string {
		var out []string
		if len(sels) == 0 {
			sels = []string{`{__name__=~".+"}`}
		}
		for _, sel := range sels {
			ms, err := p.ParseMetricSelector(sel)
			require.NoError(t, err)
			q, _ := ref.Querier(d.start-60_000, d.end)
			var vals []string
			if name == "" {
				vals, _, err = q.LabelNames(context.Background(), nil, ms...)
			} else {
				vals, _, err = q.LabelValues(context.Background(), name, nil, ms...)
			}
			require.NoError(t, err)
			out = append(out, vals...)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}

	seriesCases := []struct {
		name       string
		match      []string
		start, end int64 // minutes from the data set's start; 0, 0: open
	}{
		{"one selector", []string{`http_requests_total{job="api", code="500"}`}, 0, 0},
		{"regex", []string{`{__name__=~"request_duration_seconds_(sum|count)"}`}, 0, 0},
		{"union", []string{`node_temp`, `stale_metric`, `node_temp{instance="i1"}`}, 0, 0},
		// i0 ended by a marker at 60m, i2 stopped at 90m, i1 paused at
		// 120m..140m: the range decides which series had samples.
		{"range excludes ended series", []string{`stale_metric`}, 70, 100},
		// Only i1's staleness marker (at 120m + 7 ms) is in range: a
		// marker is a sample, so Prometheus lists the series.
		{"range holding only a marker", []string{`stale_metric`}, 120, 139},
		{"escaping", []string{`jobs_done_total`}, 0, 0},
	}
	for _, c := range seriesCases {
		t.Run("series/"+c.name, func(t *testing.T) {
			v := url.Values{"match[]": c.match}
			mint, maxt := minTime.UnixMilli(), maxTime.UnixMilli()
			if c.start != 0 || c.end != 0 {
				v.Set("start", min(c.start))
				v.Set("end", min(c.end))
				mint, maxt = d.start+c.start*60*1000, d.start+c.end*60*1000
			}
			code, r := get(t, node.srv.URL, "/api/v1/series", v)
			require.Equal(t, http.StatusOK, code, r.Error)
			var got []map[string]string
			require.NoError(t, json.Unmarshal(r.Data, &got))
			gotS := make([]string, 0, len(got))
			for _, m := range got {
				gotS = append(gotS, labels.FromMap(m).String())
			}
			want := wantSeries(c.match, mint, maxt)
			if len(c.match) > 1 {
				require.Equal(t, want, gotS, "several match[] answer merged in label order")
			} else {
				require.ElementsMatch(t, want, gotS)
			}
			require.NotEmpty(t, gotS)
		})
	}

	t.Run("series/limit", func(t *testing.T) {
		code, r := get(t, node.srv.URL, "/api/v1/series", url.Values{"match[]": {"http_requests_total"}, "limit": {"5"}})
		require.Equal(t, http.StatusOK, code)
		var got []map[string]string
		require.NoError(t, json.Unmarshal(r.Data, &got))
		require.Len(t, got, 5)
		require.Equal(t, []string{"results truncated due to limit"}, r.Warnings)
	})

	labelCases := []struct {
		name, label string
		match       []string
	}{
		{"all names", "", nil},
		{"names of one metric", "", []string{"request_duration_seconds_bucket"}},
		{"names of two selectors", "", []string{"node_temp", `jobs_done_total`}},
		{"metric names", "__name__", nil},
		{"jobs", "job", nil},
		{"instances of a metric", "instance", []string{`stale_metric`}},
		{"le of a job", "le", []string{`request_duration_seconds_bucket{job="db"}`}},
		{"unicode value", "unit", nil},
	}
	for _, c := range labelCases {
		t.Run("labels/"+c.name, func(t *testing.T) {
			path := "/api/v1/labels"
			if c.label != "" {
				path = "/api/v1/label/" + c.label + "/values"
			}
			v := url.Values{"match[]": c.match}
			if len(c.name)%2 == 0 { // the whole history as the range, half the time
				v.Set("start", fmtTime(d.start-60_000, true))
				v.Set("end", fmtTime(d.end, false))
			}
			code, r := get(t, node.srv.URL, path, v)
			require.Equal(t, http.StatusOK, code, r.Error)
			var got []string
			require.NoError(t, json.Unmarshal(r.Data, &got))
			require.Equal(t, wantLabels(c.label, c.match), got)
			require.NotEmpty(t, got)
		})
	}

	t.Run("labels/limit", func(t *testing.T) {
		code, r := get(t, node.srv.URL, "/api/v1/label/__name__/values", url.Values{"limit": {"2"}})
		require.Equal(t, http.StatusOK, code)
		var got []string
		require.NoError(t, json.Unmarshal(r.Data, &got))
		require.Equal(t, wantLabels("__name__", nil)[:2], got)
		require.Equal(t, []string{"results truncated due to limit"}, r.Warnings)
	})

	t.Run("labels/none match", func(t *testing.T) {
		code, r := get(t, node.srv.URL, "/api/v1/label/job/values", url.Values{"match[]": {`nothing_here`}})
		require.Equal(t, http.StatusOK, code)
		require.JSONEq(t, `[]`, string(r.Data))
	})

	t.Run("buildinfo", func(t *testing.T) {
		code, r := get(t, node.srv.URL, "/api/v1/status/buildinfo", nil)
		require.Equal(t, http.StatusOK, code)
		var bi BuildInfo
		require.NoError(t, json.Unmarshal(r.Data, &bi))
		require.Equal(t, "3.16.0", bi.Version)
		require.NotEmpty(t, bi.GoVersion)
	})
}
