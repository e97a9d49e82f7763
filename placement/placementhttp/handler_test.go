package placementhttp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/tessera-tsdb/tessera/placement/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), string(b))
	return resp.StatusCode, out
}

func TestPlacementOverHTTP(t *testing.T) {
	eps := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	mux := http.NewServeMux()
	(&Handler{Store: placement.NewStore(cli, placement.StoreOptions{})}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	u := srv.URL + Path

	code, out := call(t, "GET", u, "")
	require.Equal(t, 404, code, out)
	require.Contains(t, out["error"], "not found")

	code, out = call(t, "POST", u+"/init", `{"instances":[
		{"id":"a","isolationGroup":"r1","endpoint":"127.0.0.1:9001"},
		{"id":"b","isolationGroup":"r2","endpoint":"127.0.0.1:9002"},
		{"id":"c","isolationGroup":"r3","endpoint":"127.0.0.1:9003"}],"numShards":64,"replicaFactor":3}`)
	require.Equal(t, 200, code, out)
	require.EqualValues(t, 64, out["numShards"])

	code, out = call(t, "POST", u+"/init", `{"instances":[{"id":"a","isolationGroup":"r1","endpoint":"127.0.0.1:9001"}],"replicaFactor":1}`)
	require.Equal(t, 409, code, out)

	for _, id := range []string{"a", "b", "c"} {
		code, out = call(t, "POST", u+"/mark-available", `{"instance":"`+id+`"}`)
		require.Equal(t, 200, code, out)
	}
	code, out = call(t, "POST", u, `{"instances":[{"id":"d","isolationGroup":"r4","endpoint":"127.0.0.1:9004"}]}`)
	require.Equal(t, 200, code, out)
	// Shards are moving now: another add is refused unless forced.
	code, out = call(t, "POST", u, `{"instances":[{"id":"e","isolationGroup":"r5","endpoint":"127.0.0.1:9005"}]}`)
	require.Equal(t, 409, code, out)
	require.Contains(t, out["error"], "moving")
	// Undo the add while d is INITIALIZING.
	code, out = call(t, "DELETE", u+"/d", "")
	require.Equal(t, 200, code, out)
	require.Len(t, out["instances"], 3)

	code, out = call(t, "DELETE", u+"/nope", "")
	require.Equal(t, 400, code, out)
	require.Contains(t, out["error"], "unknown instance")
	code, out = call(t, "POST", u, `{"instances":[{"id":"x"}]}`)
	require.Equal(t, 400, code, out)
	code, out = call(t, "POST", u, `{"bogus":1}`)
	require.Equal(t, 400, code, out)
	require.Contains(t, out["error"], "bad JSON")
}
