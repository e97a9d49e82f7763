package promapi

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestFormatting(t *testing.T) {
	floats := []struct {
		v    float64
		want string
	}{
		{0, `"0"`}, {math.Copysign(0, -1), `"-0"`}, {1, `"1"`}, {0.1, `"0.1"`}, {-2.5, `"-2.5"`},
		{123456789.125, `"123456789.125"`}, {1e20, `"100000000000000000000"`},
		{1e21, `"1e+21"`}, {1e-6, `"0.000001"`}, {9.99e-7, `"9.99e-07"`}, {-2.5e-7, `"-2.5e-07"`},
		{math.Inf(1), `"+Inf"`}, {math.Inf(-1), `"-Inf"`}, {math.NaN(), `"NaN"`},
	}
	for _, c := range floats {
		require.Equal(t, c.want, string(appendFloat(nil, c.v)), "%v", c.v)
	}
	stamps := []struct {
		ms   int64
		want string
	}{
		{0, "0"}, {1500, "1.500"}, {1001, "1.001"}, {1010, "1.010"}, {1735689600123, "1735689600.123"},
		{1735689600000, "1735689600"}, {-1500, "-1.500"}, {999, "0.999"},
	}
	for _, c := range stamps {
		require.Equal(t, c.want, string(appendTimestamp(nil, c.ms)), "%d", c.ms)
	}
	v, err := appendValue(nil, promql.Scalar{T: 1500, V: 1e-7})
	require.NoError(t, err)
	require.Equal(t, `[1.5,"0.0000001"]`, string(v), "scalars use their own MarshalJSON, as in Prometheus")
	v, err = appendValue(nil, promql.String{T: 2000, V: "a\"b"})
	require.NoError(t, err)
	require.Equal(t, `[2,"a\"b"]`, string(v))
	v, err = appendValue(nil, promql.Vector{})
	require.NoError(t, err)
	require.Equal(t, `[]`, string(v))
	v, err = appendValue(nil, promql.Matrix{{Metric: labels.EmptyLabels(), Floats: []promql.FPoint{{T: 1, F: 2}}}})
	require.NoError(t, err)
	require.Equal(t, `[{"metric":{},"values":[[0.001,"2"]]}]`, string(v))
}

// TestAppendStringMatchesEncodingJSON: label names and values are escaped
// exactly as encoding/json escapes strings.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "<&>", "\n\r\t\b\f\x00\x1f\x7f", "温度 °C", "\u2028\u2029", "bad\xffutf8\xc3"} {
		want, _ := json.Marshal(s)
		require.Equal(t, string(want), string(appendString(nil, s)), "%q", s)
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if rapid.Bool().Draw(t, "raw") {
			s = string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes"))
		}
		want, _ := json.Marshal(s)
		require.Equal(t, string(want), string(appendString(nil, s)), "%q", s)
	})
}

// TestResponseBytes pins a whole response body.
func TestResponseBytes(t *testing.T) {
	srv, _ := newMemAPI(t, Options{})
	resp, err := http.Get(srv.URL + "/api/v1/query?" + url.Values{
		"query": {`x{job="a"} / 4`}, "time": {"1735689630.5"}}.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"a"},"value":[1735689630.500,"0.5"]}]}}`, string(body))

	resp, err = http.Get(srv.URL + "/api/v1/query?query=rate(")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:6: parse error: unclosed left parenthesis"}`, string(body))
}

func TestStatsParam(t *testing.T) {
	srv, _ := newMemAPI(t, Options{})
	code, r := get(t, srv.URL, "/api/v1/query", url.Values{"query": {"sum(x)"}, "time": {fmtTime(testBase+60_000, false)}, "stats": {"all"}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var d struct {
		Stats struct {
			Timings map[string]any `json:"timings"`
			Samples map[string]any `json:"samples"`
		} `json:"stats"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &d))
	require.Contains(t, d.Stats.Timings, "evalTotalTime")
	require.Contains(t, d.Stats.Samples, "totalQueryableSamples")
}

// TestValueSizeCoversTypicalResults: the estimate that sizes the response
// buffer is at least what a typical range result renders (so the buffer
// is not grown) and not wildly more.
func TestValueSizeCoversTypicalResults(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m promql.Matrix
	for i := range 200 {
		s := promql.Series{Metric: labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", strconv.Itoa(i%8),
			"instance", fmt.Sprintf("10.0.%d.%d:9100", i/250, i%250+1), "job", "node", "mode", "iowait")}
		for k := range 121 {
			f := rng.Float64() * math.Pow(10, float64(rng.IntN(12)-3))
			s.Floats = append(s.Floats, promql.FPoint{T: 1_795_596_592_000 + int64(k)*15_000, F: f})
		}
		m = append(m, s)
	}
	got, err := appendValue(nil, m)
	require.NoError(t, err)
	est := valueSize(m)
	require.GreaterOrEqual(t, est, len(got), "estimate below the rendered size")
	require.Less(t, est, 2*len(got), "estimate far above the rendered size")
}
