package bench

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/bench/nodeexporter"
)

// QueryOptions describe a run of the node_exporter workload's queries
// (nodeexporter.Queries) against a Prometheus HTTP API.
type QueryOptions struct {
	// URL is the API's base URL: a Tessera node, VictoriaMetrics
	// (http://host:8428), Prometheus; /api/v1/query_range is appended.
	URL string
	// Start is the workload's start (ms), as WriteNodeExporter was given
	// it; the queries cover [Start, nodeexporter.End(Start)] at
	// nodeexporter.Step, both ends moved out to a multiple of the step.
	Start int64
	// Rounds: each query runs this many times (all queries once per
	// round, so that a burst of load on a shared machine spreads over
	// all of them), and its best time is reported.
	Rounds int
	// Compare, when set, is a second API whose answers are compared with
	// URL's, point by point (CompareResults).
	Compare string
	// Only, when set, runs only the queries of these names.
	Only []string
	Security
}

// Validate reports options no query run can use.
func (o QueryOptions) Validate() error {
	if o.URL == "" {
		return errors.New("bench queries: --url is required")
	}
	if o.Start <= 0 {
		return errors.New("bench queries: --start (ms) is required: the start `tessera bench --workload nodeexporter` printed")
	}
	if o.Rounds <= 0 {
		return fmt.Errorf("bench queries: --rounds must be > 0, got %d", o.Rounds)
	}
	for _, u := range []string{o.URL, o.Compare} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("bench queries: %q is not an http(s) URL", u)
		}
	}
	if _, err := o.queries(); err != nil {
		return err
	}
	return nil
}

func (o QueryOptions) queries() ([]nodeexporter.Query, error) {
	if len(o.Only) == 0 {
		return nodeexporter.Queries, nil
	}
	var out []nodeexporter.Query
	for _, name := range o.Only {
		found := false
		for _, q := range nodeexporter.Queries {
			if q.Name == name {
				out, found = append(out, q), true
			}
		}
		if !found {
			var names []string
			for _, q := range nodeexporter.Queries {
				names = append(names, q.Name)
			}
			return nil, fmt.Errorf("bench queries: no query named %q (have %s)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// QueryRange is the range the queries cover for data from start (ms):
// start and end in whole seconds, moved out to multiples of the step, as
// VictoriaMetrics would align them itself (with its result cache on), so
// that every store evaluates the same steps.
func QueryRange(start int64) (from, to int64) {
	step := nodeexporter.Step.Milliseconds()
	from = start / step * step
	end := nodeexporter.End(start)
	to = (end + step - 1) / step * step
	return from / 1000, to / 1000
}

// QueryTiming is one query's outcome in a run.
type QueryTiming struct {
	Name   string
	Runs   []time.Duration // wall time of each run: request sent to last byte of the answer read
	Series int             // series in the answer
	Points int             // points in the answer
	Bytes  int             // answer size on the wire (gzip)
}

// Best is the shortest run.
func (q QueryTiming) Best() time.Duration {
	best := q.Runs[0]
	for _, d := range q.Runs[1:] {
		best = min(best, d)
	}
	return best
}

// GeoMean is the geometric mean of the queries' best times.
func GeoMean(ts []QueryTiming) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	var sum float64
	for _, q := range ts {
		sum += math.Log(float64(q.Best()))
	}
	return time.Duration(math.Exp(sum / float64(len(ts))))
}

// RunQueries runs the queries o.Rounds times each against o.URL as
// Grafana would (GET /api/v1/query_range, Accept-Encoding: gzip), prints
// a table of each query's best time, answer size and runs and the
// geometric mean of the best times, and, with o.Compare, how the answers
// of the two APIs compare.
func RunQueries(ctx context.Context, o QueryOptions, out io.Writer) ([]QueryTiming, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	qs, err := o.queries()
	if err != nil {
		return nil, err
	}
	client, err := o.Security.Client(5 * time.Minute)
	if err != nil {
		return nil, fmt.Errorf("bench queries: %w", err)
	}
	defer client.CloseIdleConnections()
	from, to := QueryRange(o.Start)
	fmt.Fprintf(out, "queries: %d range queries over [%d, %d] s at step %v, best of %d, against %s\n",
		len(qs), from, to, nodeexporter.Step, o.Rounds, o.URL)
	timings := make([]QueryTiming, len(qs))
	for r := range o.Rounds {
		for i, q := range qs {
			d, res, size, err := queryRange(ctx, client, o.URL, q.Expr, from, to)
			if err != nil {
				return nil, fmt.Errorf("bench queries: %s (round %d): %w", q.Name, r+1, err)
			}
			t := &timings[i]
			t.Name = q.Name
			t.Runs = append(t.Runs, d)
			t.Series, t.Points, t.Bytes = len(res), res.points(), size
		}
	}
	fmt.Fprintf(out, "%-20s %10s %8s %9s %10s  %s\n", "query", "best_ms", "series", "points", "gzip_kb", "runs_ms")
	for _, t := range timings {
		runs := make([]string, len(t.Runs))
		for k, d := range t.Runs {
			runs[k] = fmt.Sprintf("%.2f", ms(d))
		}
		fmt.Fprintf(out, "%-20s %10.2f %8d %9d %10.1f  %s\n", t.Name, ms(t.Best()), t.Series, t.Points,
			float64(t.Bytes)/1024, strings.Join(runs, " "))
	}
	fmt.Fprintf(out, "%-20s %10.2f\n", "geomean", ms(GeoMean(timings)))
	if o.Compare == "" {
		return timings, nil
	}
	fmt.Fprintf(out, "compare: %s (a) with %s (b), values within %g relative\n", o.URL, o.Compare, compareTolerance)
	for _, q := range qs {
		_, a, _, err := queryRange(ctx, client, o.URL, q.Expr, from, to)
		if err != nil {
			return timings, fmt.Errorf("bench queries: compare %s: %w", q.Name, err)
		}
		_, b, _, err := queryRange(ctx, client, o.Compare, q.Expr, from, to)
		if err != nil {
			return timings, fmt.Errorf("bench queries: compare %s against %s: %w", q.Name, o.Compare, err)
		}
		fmt.Fprintf(out, "%-20s %s\n", q.Name, CompareResults(a, b, from*1000+warmUp.Milliseconds()))
	}
	return timings, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Matrix is a range query's answer: per series (its labels, rendered in
// a canonical order), the points by timestamp (ms).
type Matrix map[string]map[int64]float64

func (m Matrix) points() int {
	n := 0
	for _, s := range m {
		n += len(s)
	}
	return n
}

// queryRange runs one range query and returns its wall time (until the
// last byte of the answer is read, not decompressed), its answer and the
// answer's size on the wire.
func queryRange(ctx context.Context, c *http.Client, base, expr string, from, to int64) (time.Duration, Matrix, int, error) {
	p := url.Values{"query": {expr}, "start": {strconv.FormatInt(from, 10)}, "end": {strconv.FormatInt(to, 10)},
		"step": {strconv.FormatInt(int64(nodeexporter.Step/time.Second), 10)}}
	u := strings.TrimSuffix(base, "/") + "/api/v1/query_range?" + p.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	// Set by hand, the transport leaves the answer compressed: the time
	// is the server's and the wire's, not this client's gunzip.
	req.Header.Set("Accept-Encoding", "gzip")
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	d := time.Since(t0)
	resp.Body.Close()
	if err != nil {
		return 0, nil, 0, fmt.Errorf("read answer: %w", err)
	}
	size := len(body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return 0, nil, 0, fmt.Errorf("gunzip answer: %w", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			return 0, nil, 0, fmt.Errorf("gunzip answer: %w", err)
		}
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil, 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body[:min(len(body), 512)]))
	}
	m, err := parseMatrix(body)
	if err != nil {
		return 0, nil, 0, err
	}
	return d, m, size, nil
}

// parseMatrix reads a Prometheus API answer holding a matrix.
func parseMatrix(body []byte) (Matrix, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string    `json:"metric"`
				Values [][2]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("parse answer: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("status %q: %s", r.Status, r.Error)
	}
	if r.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("result type %q, want matrix", r.Data.ResultType)
	}
	m := make(Matrix, len(r.Data.Result))
	for _, s := range r.Data.Result {
		key := labelKey(s.Metric)
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("series %s twice in the answer", key)
		}
		pts := make(map[int64]float64, len(s.Values))
		for _, p := range s.Values {
			ts, err := strconv.ParseFloat(string(p[0]), 64)
			if err != nil {
				return nil, fmt.Errorf("series %s: timestamp %s: %w", key, p[0], err)
			}
			var vs string
			if err := json.Unmarshal(p[1], &vs); err != nil {
				return nil, fmt.Errorf("series %s: value %s: %w", key, p[1], err)
			}
			v, err := strconv.ParseFloat(vs, 64)
			if err != nil {
				return nil, fmt.Errorf("series %s: value %q: %w", key, vs, err)
			}
			pts[int64(math.Round(ts*1000))] = v
		}
		m[key] = pts
	}
	return m, nil
}

func labelKey(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", n, m[n])
	}
	b.WriteByte('}')
	return b.String()
}

// compareTolerance is how far apart (relative) two stores' values may be
// and still agree: different summation orders differ in the last bits.
const compareTolerance = 1e-9

// warmUp is how long after the range's start the queries' 5 m windows
// are first full (plus a scrape interval): before that, stores that
// extrapolate rates (Prometheus, Tessera) and ones that do not
// (VictoriaMetrics) differ most, so CompareResults also reports the
// points after it alone.
const warmUp = 5*time.Minute + nodeexporter.Interval*time.Millisecond

// CompareResults says whether two answers agree (the same series, the
// same steps, values within compareTolerance relative, NaN equal to
// NaN), and if not, how they differ: counts, the largest relative
// difference over all points and over those at or after warm (ms), and
// the first difference found in series order. Series that match only
// once __name__ is dropped (VictoriaMetrics keeps the name where
// Prometheus drops it, e.g. avg_over_time) are compared as one, and
// that is said.
func CompareResults(a, b Matrix, warm int64) string {
	var onlyA, onlyB, ptsOnlyA, ptsOnlyB, compared, differ, comparedWarm, differWarm int
	var maxRel, maxRelWarm float64
	var first, renamed string
	if na, nb := dropNames(a), dropNames(b); na != nil && nb != nil && !sameKeys(a, b) && sameKeys(na, nb) {
		a, b, renamed = na, nb, " (series matched with __name__ dropped: the two differ in keeping it)"
	}
	keys := unionKeys(a, b)
	note := func(s string) {
		if first == "" {
			first = s
		}
	}
	for _, k := range keys {
		sa, inA := a[k]
		sb, inB := b[k]
		switch {
		case !inB:
			onlyA++
			note(fmt.Sprintf("series %s only in a", k))
			continue
		case !inA:
			onlyB++
			note(fmt.Sprintf("series %s only in b", k))
			continue
		}
		ts := unionKeys(sa, sb)
		for _, t := range ts {
			va, okA := sa[t]
			vb, okB := sb[t]
			switch {
			case !okB:
				ptsOnlyA++
				note(fmt.Sprintf("%s t=%d: %v in a, none in b", k, t, va))
				continue
			case !okA:
				ptsOnlyB++
				note(fmt.Sprintf("%s t=%d: none in a, %v in b", k, t, vb))
				continue
			}
			compared++
			rel := relDiff(va, vb)
			if t >= warm {
				comparedWarm++
			}
			if rel > compareTolerance {
				differ++
				maxRel = max(maxRel, rel)
				if t >= warm {
					differWarm++
					maxRelWarm = max(maxRelWarm, rel)
				}
				note(fmt.Sprintf("%s t=%d: %v in a, %v in b", k, t, va, vb))
			}
		}
	}
	if first == "" {
		return fmt.Sprintf("agree: %d series, %d points%s", len(a), compared, renamed)
	}
	return fmt.Sprintf("DIFFER: %d vs %d series (%d only in a, %d only in b); %d points compared, %d differ (max rel %.3g; "+
		"after the warm-up %d of %d, max rel %.3g), %d only in a, %d only in b; first: %s%s",
		len(a), len(b), onlyA, onlyB, compared, differ, maxRel, differWarm, comparedWarm, maxRelWarm, ptsOnlyA, ptsOnlyB, first, renamed)
}

// dropNames is m with __name__ dropped from every series, nil if that
// makes two series one.
func dropNames(m Matrix) Matrix {
	out := make(Matrix, len(m))
	for k, pts := range m {
		k2 := nameLabel.ReplaceAllString(k, "{")
		if _, dup := out[k2]; dup {
			return nil
		}
		out[k2] = pts
	}
	return out
}

// nameLabel matches __name__ in a labelKey: it sorts first.
var nameLabel = regexp.MustCompile(`^\{__name__="(?:[^"\\]|\\.)*",?`)

func sameKeys(a, b Matrix) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// relDiff is |a-b| relative to the larger magnitude: 0 for equal values
// (infinities included) and for two NaNs, +Inf for NaN against a number.
func relDiff(a, b float64) float64 {
	if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
		return 0
	}
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.Inf(1)
	}
	return math.Abs(a-b) / max(math.Abs(a), math.Abs(b))
}

// unionKeys is the keys of a and b, each once, sorted.
func unionKeys[K cmp.Ordered, V any](a, b map[K]V) []K {
	keys := make([]K, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
