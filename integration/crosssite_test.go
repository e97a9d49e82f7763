package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBinaryRefusesCrossSitePlacementChange runs the real binary (loopback,
// no auth: the default layout) and sends it what a web page in an
// operator's browser can: a form POST with Content-Type text/plain and a
// JSON body adding an instance "evil" (issue 32, case 10: it was obeyed),
// the same with a cross-site Origin or Sec-Fetch-Site, and a read through
// a DNS-rebound name. Each is refused with its reason and the placement
// stays as it was; a JSON request from a tool and a remote write pass.
func TestBinaryRefusesCrossSitePlacementChange(t *testing.T) {
	b := newBinaryNode(t)
	b.start()
	base := "http://" + b.http
	const path = "/api/v1/services/tessera/placement"
	body := `{"instances":[{"id":"evil","isolationGroup":"rack9","endpoint":"127.0.0.1:1","weight":1}],"force":true}`
	send := func(method, path, host string, hdr map[string]string, body string) (int, string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{Timeout: 30 * time.Second}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	instances := func() []string {
		code, out := send("GET", path, "", nil, "")
		require.Equal(t, 200, code, out)
		var p struct {
			Instances []struct {
				ID string `json:"id"`
			} `json:"instances"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &p), out)
		var ids []string
		for _, in := range p.Instances {
			ids = append(ids, in.ID)
		}
		return ids
	}
	before := instances()
	require.Equal(t, []string{"solo"}, before)

	for _, c := range []struct {
		name string
		host string
		hdr  map[string]string
		want int
		why  string
	}{
		{"form POST, text/plain", "", map[string]string{"Content-Type": "text/plain"}, 415, "not application/json"},
		{"cross-site Sec-Fetch-Site", "", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403, "cross-origin"},
		{"cross-origin Origin", "", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403, "evil.example"},
		{"DNS rebinding", "evil.example:" + strings.Split(b.http, ":")[1], map[string]string{"Content-Type": "application/json"}, 403, "DNS rebinding"},
	} {
		code, out := send("POST", path, c.host, c.hdr, body)
		require.Equal(t, c.want, code, "%s: %s", c.name, out)
		require.Contains(t, out, c.why, c.name)
	}
	code, out := send("GET", path, "evil.example", nil, "")
	require.Equal(t, 403, code, "a read through a rebound name: %s", out)
	require.Equal(t, before, instances(), "no refused request changed the placement")

	// A tool's JSON request reaches the placement API (which answers for
	// itself: an empty add is a bad request), and ingest still works.
	code, out = send("POST", path, "", map[string]string{"Content-Type": "application/json"}, `{"instances":[]}`)
	require.Equal(t, 400, code, out)
	require.NoError(t, newDataset().write(base, 0, 10, time.Now().UnixMilli()))
}
