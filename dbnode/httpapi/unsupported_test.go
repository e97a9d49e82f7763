package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/uber-go/tally/v4"
)

// newScopedFixture is newFixture with a test metrics scope.
func newScopedFixture(t *testing.T) (*fixture, tally.TestScope) {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	db := storagetest.Open(t, 64, nil)
	st := newTestState("")
	st.serve(Local{DB: db})
	api := newAPI(t, Options{Namespace: "default", NumShards: 64, Metrics: scope, State: st})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, db: db, api: api, state: st}, scope
}

func counterValue(scope tally.TestScope, name string, tags map[string]string) int64 {
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() != name {
			continue
		}
		match := true
		for k, v := range tags {
			if c.Tags()[k] != v {
				match = false
			}
		}
		if match {
			return c.Value()
		}
	}
	return 0
}

// floatsOnly is a Backend that does not store native histograms (as a
// cluster session with replicas does not yet): embedding the interface
// hides Local's HistogramWriter methods.
type floatsOnly struct{ Backend }

// A remote write 1.0 request carrying native histograms to a backend that
// does not store them is refused whole with 400 naming what and why,
// counted by reason, and nothing of it is stored: not even its float
// samples, known to the series cache or not.
func TestRemoteWriteV1RefusesWhatIsNotStored(t *testing.T) {
	f, scope := newScopedFixture(t)
	f.state.serve(floatsOnly{Local{DB: f.db}})
	url := f.srv.URL + "/api/v1/prom/remote/write"
	now := time.Now().UnixMilli()
	up := ts("up", now-2000, 1, prompb.Label{Name: "job", Value: "a"})
	upID := ident.FromLabels(labels.FromStrings("__name__", "up", "job", "a"))
	// up is known to the series cache from here on.
	code, msg := post(t, url, writeBody(t, up))
	require.Equal(t, http.StatusNoContent, code, msg)

	hist := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "latency"}},
		Histograms: []prompb.Histogram{prompb.FromIntHistogram(now, &histogram.Histogram{Count: 2, Sum: 1,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{2}})}}
	for _, tc := range []struct {
		name, reason, want string
		body               []byte
	}{
		{"floats and histograms", "native_histograms", `timeseries 1 {__name__="latency"} carries native histogram samples: not supported yet`,
			writeBody(t, ts("up", now, 2, prompb.Label{Name: "job", Value: "a"}), hist)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := post(t, url, tc.body)
			require.Equal(t, http.StatusBadRequest, code, msg)
			require.Contains(t, msg, tc.want)
			require.Contains(t, msg, "nothing was written")
			require.Equal(t, int64(1), counterValue(scope, "remote_write_errors", map[string]string{"reason": tc.reason}))
		})
	}
	// Only the first sample of up was stored.
	require.Equal(t, []int64{now - 2000}, readIDs(t, f, upID, now-10_000, now+1))
}
