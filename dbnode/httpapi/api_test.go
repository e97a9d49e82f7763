package httpapi

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	srv   *httptest.Server
	db    *storage.Database
	api   *API
	state *testState // serves db, ready; a test may swap the backend
}

func newFixture(t *testing.T, maxBody int64) *fixture {
	t.Helper()
	db := storagetest.Open(t, 64, nil)
	st := newTestState("")
	st.serve(Local{DB: db})
	api := newAPI(t, Options{Namespace: "default", MaxBodyBytes: maxBody, NumShards: 64, State: st})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, db: db, api: api, state: st}
}

func writeBody(t *testing.T, series ...prompb.TimeSeries) []byte {
	raw, err := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	require.NoError(t, err)
	return snappy.Encode(nil, raw)
}

func post(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func ts(name string, t int64, v float64, extra ...prompb.Label) prompb.TimeSeries {
	return prompb.TimeSeries{
		Labels:  append([]prompb.Label{{Name: "__name__", Value: name}}, extra...),
		Samples: []prompb.Sample{{Timestamp: t, Value: v}},
	}
}

func TestRemoteWriteThenRead(t *testing.T) {
	f := newFixture(t, 32<<20)
	now := time.Now().UnixMilli()
	stale := math.Float64frombits(0x7ff0000000000002)
	for _, path := range []string{"/api/v1/prom/remote/write", "/api/v1/write"} {
		code, msg := post(t, f.srv.URL+path, writeBody(t,
			ts("up", now-1000, 1, prompb.Label{Name: "job", Value: "a"}),
			ts("up", now, stale, prompb.Label{Name: "job", Value: "a"}),
			ts("up", now, 0, prompb.Label{Name: "job", Value: "b"})))
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	q := &prompb.Query{
		StartTimestampMs: now - 5000, EndTimestampMs: now + 1,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "up"}, {Type: prompb.LabelMatcher_RE, Name: "job", Value: "a|c"}},
	}
	for _, path := range []string{"/api/v1/prom/remote/read", "/api/v1/read"} {
		series := remoteRead(t, f.srv.URL+path, q)
		require.Len(t, series, 1)
		got := series[0]
		require.Equal(t, []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "a"}}, got.Labels)
		require.Len(t, got.Samples, 2)
		require.Equal(t, uint64(0x7ff0000000000002), math.Float64bits(got.Samples[1].Value))
	}
}

func TestRemoteWriteErrorClasses(t *testing.T) {
	f := newFixture(t, 4096)
	now := time.Now().UnixMilli()
	url := f.srv.URL + "/api/v1/prom/remote/write"
	big := make([]byte, 5000)
	bigDecoded := snappy.Encode(nil, bytes.Repeat([]byte{0}, 100_000)) // small body, large when decoded
	for _, tc := range []struct {
		name string
		body []byte
		code int
		want string
	}{
		{"bad snappy", []byte("not snappy at all"), 400, "bad snappy"},
		{"bad protobuf", snappy.Encode(nil, []byte{0xff, 0xff, 0xff, 0x01}), 400, "bad protobuf"},
		{"no name", writeBody(t, prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "x"}}, Samples: []prompb.Sample{{Timestamp: now, Value: 1}}}), 400, "no __name__"},
		{"empty label name", writeBody(t, ts("up", now, 1, prompb.Label{Name: "", Value: "x"})), 400, "empty label name"},
		{"duplicate label", writeBody(t, ts("up", now, 1, prompb.Label{Name: "a", Value: "1"}, prompb.Label{Name: "a", Value: "2"})), 400, "duplicate label name"},
		{"invalid utf8", writeBody(t, ts("up", now, 1, prompb.Label{Name: "a", Value: "\xff\xfe"})), 400, "UTF-8"},
		{"out of retention", writeBody(t, ts("up", now-int64(72*time.Hour/time.Millisecond), 1)), 400, "out of retention"},
		{"too far in future", writeBody(t, ts("up", now+int64(time.Hour/time.Millisecond), 1)), 400, "too far in the future"},
		{"body too large", big, 413, "over the limit"},
		{"decoded too large", bigDecoded, 413, "over the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := post(t, url, tc.body)
			require.Equal(t, tc.code, code, msg)
			require.Contains(t, msg, tc.want)
		})
	}
	// Nothing stored was harmed: a good write still works and reads back.
	code, msg := post(t, url, writeBody(t, ts("ok", now, 1)))
	require.Equal(t, http.StatusNoContent, code, msg)

	// Unknown namespace: 400.
	code, msg = post(t, url+"?namespace=nope", writeBody(t, ts("ok", now, 1)))
	require.Equal(t, http.StatusBadRequest, code, msg)

	// Shutting down (commit log closed): 503 so Prometheus retries.
	require.NoError(t, f.db.Close())
	code, msg = post(t, url, writeBody(t, ts("ok", now, 1)))
	require.Equal(t, http.StatusServiceUnavailable, code, msg)
}

func TestReadyAndHealth(t *testing.T) {
	st := newTestState("recovering: storage is not open yet")
	api := newAPI(t, Options{Namespace: "default", State: st})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	get := func(p string) (int, string) {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get("/health")
	require.Equal(t, 200, code)
	code, body := get("/ready")
	require.Equal(t, 503, code)
	require.Contains(t, body, "recovering")
	// Writes before recovery get 503, not a crash.
	code, _ = post(t, srv.URL+"/api/v1/prom/remote/write", writeBody(t, ts("up", 1, 1)))
	require.Equal(t, 503, code)
	require.True(t, strings.HasPrefix(body, "{"))

	// Damage found at start shows on /ready without making the node
	// unready: it serves what was not damaged.
	st.serve(Local{})
	st.setReason("")
	code, body = get("/ready")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"ready":true}`, body)
	st.setDamage([]string{"commit log: corruption in 1 files: skipped 57 bytes"})
	code, body = get("/ready")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"ready":true,"damage":["commit log: corruption in 1 files: skipped 57 bytes"]}`, body)
}

// /ready asks the ready function on every request, so progress that
// moves while the node stays unready (a bootstrap round) is current on
// each read, with the progress under "bootstrap".
func TestReadyAsksOnEveryRequest(t *testing.T) {
	st := newTestState("")
	st.serve(Local{})
	api := newAPI(t, Options{Namespace: "default", State: st})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	streamed := 0
	st.setReadyFunc(func() (string, any) {
		streamed++
		return "bootstrapping: " + strconv.Itoa(streamed) + " streamed", map[string]int{"roundStreamed": streamed}
	})
	for i := 1; i <= 2; i++ {
		resp, err := http.Get(srv.URL + "/ready")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 503, resp.StatusCode)
		require.JSONEq(t, `{"ready":false,"reason":"bootstrapping: `+strconv.Itoa(i)+` streamed","bootstrap":{"roundStreamed":`+strconv.Itoa(i)+`}}`, string(b))
	}
}

// readFrames decodes a STREAMED_XOR_CHUNKS body the way Prometheus does:
// uvarint length, big-endian CRC32-Castagnoli, ChunkedReadResponse.
func readFrames(t *testing.T, body []byte) []*prompb.ChunkedReadResponse {
	var out []*prompb.ChunkedReadResponse
	for len(body) > 0 {
		l, n := binary.Uvarint(body)
		require.Greater(t, n, 0)
		body = body[n:]
		require.GreaterOrEqual(t, len(body), 4+int(l))
		sum := binary.BigEndian.Uint32(body)
		data := body[4 : 4+l]
		require.Equal(t, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)), sum)
		var resp prompb.ChunkedReadResponse
		require.NoError(t, resp.Unmarshal(data))
		out = append(out, &resp)
		body = body[4+l:]
	}
	return out
}

func TestRemoteReadStreamedXORChunks(t *testing.T) {
	f := newFixture(t, 32<<20)
	now := time.Now().UnixMilli()
	var series []prompb.TimeSeries
	for i := 0; i < 300; i++ { // 300 samples: three chunks of at most 120
		series = append(series, ts("s", now-int64(300-i)*100, float64(i)*1.5, prompb.Label{Name: "job", Value: "x"}))
	}
	series = append(series, ts("s", now, math.Float64frombits(0x7ff0000000000002), prompb.Label{Name: "job", Value: "y"}))
	code, msg := post(t, f.srv.URL+"/api/v1/prom/remote/write", writeBody(t, series...))
	require.Equal(t, http.StatusNoContent, code, msg)

	rr, err := (&prompb.ReadRequest{
		Queries: []*prompb.Query{{StartTimestampMs: now - 60_000, EndTimestampMs: now + 1,
			Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "s"}}}},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS, prompb.ReadRequest_SAMPLES},
	}).Marshal()
	require.NoError(t, err)
	resp, err := http.Post(f.srv.URL+"/api/v1/read", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, rr)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, StreamedContentType, resp.Header.Get("Content-Type"))
	frames := readFrames(t, body)
	require.Len(t, frames, 2)
	got := map[string][][2]float64{}
	for _, fr := range frames {
		cs := fr.ChunkedSeries[0]
		job := cs.Labels[1].Value
		for _, c := range cs.Chunks {
			require.Equal(t, prompb.Chunk_XOR, c.Type)
			ch, err := chunkenc.FromData(chunkenc.EncXOR, c.Data)
			require.NoError(t, err)
			it := ch.Iterator(nil)
			for it.Next() != chunkenc.ValNone {
				tt, v := it.At()
				require.GreaterOrEqual(t, tt, c.MinTimeMs)
				require.LessOrEqual(t, tt, c.MaxTimeMs)
				got[job] = append(got[job], [2]float64{float64(tt), v})
			}
		}
		if job == "x" {
			require.Len(t, cs.Chunks, 3)
		}
	}
	require.Len(t, got["x"], 300)
	require.Equal(t, 1.5*299, got["x"][299][1])
	require.Equal(t, uint64(0x7ff0000000000002), math.Float64bits(got["y"][0][1]))
}

// TestReportDamageIsBounded: damage met while serving is listed on /ready
// once per distinct line, after what start found, and at most
// maxReportedDamage lines in all, however many reads report it.
func TestReportDamageIsBounded(t *testing.T) {
	st := newTestState("")
	a := newAPI(t, Options{State: st})
	st.setDamage([]string{"at start"})
	a.ReportDamage("page 1", "page 1", "page 2")
	a.ReportDamage("page 2")
	require.Equal(t, []string{"at start", "page 1", "page 2"}, a.damage())
	for i := range 3 * maxReportedDamage {
		a.ReportDamage("page x" + strconv.Itoa(i))
	}
	require.Len(t, a.damage(), 1+maxReportedDamage)
}
