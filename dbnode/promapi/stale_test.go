package promapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStaleMarkersEndSeries pins the staleness semantics themselves (not
// only agreement with the reference): a series ended by value.StaleNaN
// vanishes at the marker; one that just stops is looked back to for 5m.
func TestStaleMarkersEndSeries(t *testing.T) {
	node, _, d := loadedNode(t)
	instancesAt := func(min int64) []string {
		code, r := get(t, node.srv.URL, "/api/v1/query", url.Values{
			"query": {"stale_metric"}, "time": {fmtTime(d.start+min*60*1000, false)}})
		require.Equal(t, http.StatusOK, code, r.Error)
		var v struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(r.Data, &v))
		var out []string
		for _, s := range v.Result {
			require.NotEqual(t, "NaN", s.Value[1], "a staleness marker must never show as a value")
			out = append(out, s.Metric["instance"])
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, []string{"i0", "i1", "i2"}, instancesAt(59))
	require.Equal(t, []string{"i1", "i2"}, instancesAt(61), "i0 ended by its marker at 60m")
	require.Equal(t, []string{"i1", "i2"}, instancesAt(93), "i2 stopped at 90m without a marker: still within the 5m lookback")
	require.Equal(t, []string{"i1"}, instancesAt(96), "i2 older than the lookback")
	require.Empty(t, instancesAt(121), "i1 paused with a marker at 120m")
	require.Equal(t, []string{"i1"}, instancesAt(141), "i1 resumed at 140m")

	// In a range query the marker cuts the series' points.
	code, r := get(t, node.srv.URL, "/api/v1/query_range", url.Values{"query": {`stale_metric{instance="i0"}`},
		"start": {fmtTime(d.start+50*60*1000, false)}, "end": {fmtTime(d.start+70*60*1000, false)}, "step": {"60"}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var m struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &m))
	require.Len(t, m.Result, 1)
	require.Len(t, m.Result[0].Values, 11, "points at 50m..60m, none after the marker")
}
