package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBinaryRefusesOpenListenersOffLoopback runs the real binary with
// HTTP, node RPC and the embedded etcd's client URL on all interfaces and
// no authentication: it exits at once, naming each open surface and the
// setting that closes it. With security.allowInsecure it starts, and
// /metrics says which surfaces are open.
func TestBinaryRefusesOpenListenersOffLoopback(t *testing.T) {
	bin := tesseraBinary(t)
	dir := t.TempDir()
	anyIf := func(loopback string) string {
		_, port, err := net.SplitHostPort(loopback)
		require.NoError(t, err)
		return "0.0.0.0:" + port
	}
	httpAddr, etcdAddr := freePort(t), freePort(t)
	conf := func(extra string) string {
		p := filepath.Join(dir, "node.yml")
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(`id: solo
dataDir: %s
http:
  listen: %s
rpc:
  listen: %s
cluster:
  autoInit: true
etcd:
  endpoints: [%s]
  embedded:
    enabled: true
    clientURL: http://%s
    listenClientURL: http://%s
    peerURL: http://%s
%s`, filepath.Join(dir, "data"), anyIf(httpAddr), anyIf(freePort(t)), etcdAddr, etcdAddr, anyIf(etcdAddr), freePort(t), extra)), 0o644))
		return p
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "node", "-f", conf("")).CombinedOutput()
	require.Error(t, err, "the node must not start: %s", out)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "exited by itself, not killed at the deadline: %s", out)
	for _, want := range []string{
		"http on " + anyIf(httpAddr), "set http.auth",
		"rpc on 0.0.0.0:", "set rpc.tls",
		"etcd-client on http://" + anyIf(etcdAddr), "etcd.embedded.clientTLS",
		"security.allowInsecure: true",
	} {
		require.Contains(t, string(out), want)
	}
	require.NotContains(t, string(out), "etcd-peer", "the peer URL is on loopback")

	b := &binaryNode{t: t, bin: bin, dir: dir, http: httpAddr, conf: conf("security:\n  allowInsecure: true\n")}
	b.start()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "tessera_security_insecure_surfaces{") {
			lines = append(lines, l)
		}
	}
	require.ElementsMatch(t, []string{
		`tessera_security_insecure_surfaces{surface="etcd-client"} 1`,
		`tessera_security_insecure_surfaces{surface="http"} 1`,
		`tessera_security_insecure_surfaces{surface="rpc"} 1`,
	}, lines)
}
