package hints

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStatusHandler(t *testing.T) {
	s, q := openTest(t, t.TempDir(), Options{})
	require.NoError(t, q.Append("default", batchOf(1)))
	require.NoError(t, q.Append("default", batchOf(2)))
	rec, ok, err := q.Next()
	require.NoError(t, err)
	require.True(t, ok)
	q.Replayed(rec)
	q.Ack(rec)
	q.Dropped(DropNotOwner, 2)

	var out struct {
		Enabled bool     `json:"enabled"`
		Targets []Status `json:"targets"`
	}
	w := httptest.NewRecorder()
	StatusHandler(s).ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/status/hints", nil))
	require.Equal(t, 200, w.Code)
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
	require.True(t, out.Enabled)
	require.Len(t, out.Targets, 1)
	st := out.Targets[0]
	require.Equal(t, "node3", st.Target)
	require.Equal(t, 1, st.Records)
	require.Positive(t, st.Bytes)
	require.Equal(t, int64(2), st.Appended)
	require.Equal(t, int64(1), st.Replayed)
	require.Equal(t, int64(3), st.ReplayedSamples)
	require.Equal(t, map[string]int64{"not_owner_samples": 2}, st.Dropped)

	w = httptest.NewRecorder()
	StatusHandler(nil).ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/status/hints", nil))
	require.JSONEq(t, `{"enabled":false,"targets":[]}`, w.Body.String())
}
