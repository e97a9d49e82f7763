package compose

import (
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/bench"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
)

// TestComposeSecureCluster starts the compose cluster with
// docker-compose.secure.yml over it, as docs/security.md tells an
// operator to: a throwaway CA, certificates, web configs and tokens
// written by the code behind scripts/gencerts (into the test's own
// directory, handed to compose as TESSERA_SECURE_DIR), HTTPS with roles,
// mutual TLS between the nodes, etcd with TLS and client certificates
// required. The init service creates the placement over TLS etcd; the
// test reads it with the host's CLI, writes with the write token and
// reads back with the read user over HTTPS, and checks the refusals: a
// wrong role 403, no credentials 401, plain HTTP and an unknown CA no
// answer, etcd without a client certificate none either. Everything the
// project created is removed at the end, pass or fail.
func TestComposeSecureCluster(t *testing.T) {
	compose := composeOrSkip(t)
	p := newProject(t, compose)
	p.overrides = []string{"docker-compose.secure.yml"}
	// Node names are in their own certificates; 127.0.0.1 is added for the
	// health check inside each container and the host's published ports.
	creds, err := testcerts.WriteCluster(filepath.Join(t.TempDir(), "secure"), []string{"node1", "node2", "node3"}, "127.0.0.1", "localhost")
	require.NoError(t, err)
	p.env = append(p.env, "TESSERA_SECURE_DIR="+creds.Dir,
		// The host's placement CLI (p.cli) takes its etcd TLS files from these.
		"TESSERA_ETCD_CA="+creds.CAFile, "TESSERA_ETCD_CERT="+creds.OperatorCert, "TESSERA_ETCD_KEY="+creds.OperatorKey)
	t.Logf("compose %q, project %s, image %s, certificates in %s", strings.Join(compose, " "), p.name, p.image, creds.Dir)

	start := time.Now()
	p.build()
	t.Logf("build (binary + image): %v", time.Since(start).Round(time.Millisecond))

	p.teardownOnCleanup()
	start = time.Now()
	p.up()
	base := strings.Replace(p.http, "http://", "https://", 1)
	t.Logf("node1 %s, etcd %s", base, p.etcd)
	// Healthy means the container's own check, `tessera ready` over HTTPS
	// with the CA, passed; the placement comes from etcd over TLS.
	p.waitSeedsReady(start)

	// etcd refuses a client without a certificate from the cluster CA, and
	// a client without TLS. (The empty flags override the variables.)
	for _, args := range [][]string{{"--cert-file=", "--key-file="}, {"--ca-file=", "--cert-file=", "--key-file="}} {
		argv := append([]string{p.bin, "placement", "--endpoints", p.etcd, "--timeout", "3s"}, args...)
		_, err := p.exec(time.Minute, append(argv, "get")...)
		require.Error(t, err, "placement get %v: etcd answered", args)
	}
	// The placement CLI inside the compose network, with the override's
	// TLS variables.
	out := p.mustDC(2*time.Minute, "run", "--rm", "-T", "placement", "get")
	require.Contains(t, out, "node3:9000")

	client := func(s bench.Security) *http.Client {
		c, err := s.Client(30 * time.Second)
		require.NoError(t, err)
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	anon := client(bench.Security{CAFile: creds.CAFile})
	writer := client(bench.Security{CAFile: creds.CAFile, BearerToken: creds.WriteToken})
	reader := client(bench.Security{CAFile: creds.CAFile, BasicAuth: creds.ReaderUser + ":" + creds.ReaderPass})
	admin := client(bench.Security{CAFile: creds.CAFile, BearerToken: creds.AdminToken})

	// /ready needs no credentials (probes carry none), only the CA.
	require.Equal(t, http.StatusOK, status(t, anon, base+"/ready"))

	// Write with the write role, read back with the read role, every
	// sample bit for bit, through remote read and PromQL.
	const series = 200
	w := written{}
	ts := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	from, to := ts.Add(-time.Minute), time.Now().Add(5*time.Minute)
	for k := 0; k < 3; k++ {
		require.NoError(t, w.writeVia(writer, base, series, ts.Add(time.Duration(k)*5*time.Second)))
	}
	require.NoError(t, w.checkVia(reader, base, from, to))
	n, err := instantQueryVia(reader, base, "count("+metric+")")
	require.NoError(t, err)
	require.EqualValues(t, series, n)

	// Refusals: a known caller without the role gets 403, no or wrong
	// credentials 401; nothing refused is stored (the read-back above
	// would then see extra samples).
	refused := written{}
	require.ErrorContains(t, refused.writeVia(reader, base, series, ts.Add(time.Minute)), "HTTP 403", "read user writing")
	require.ErrorContains(t, refused.writeVia(anon, base, series, ts.Add(time.Minute)), "HTTP 401", "anonymous write")
	wrongToken := client(bench.Security{CAFile: creds.CAFile, BearerToken: "not-" + creds.WriteToken})
	require.ErrorContains(t, refused.writeVia(wrongToken, base, series, ts.Add(time.Minute)), "HTTP 401", "unknown token")
	require.ErrorContains(t, w.checkVia(writer, base, from, to), "HTTP 403", "write token reading")
	require.ErrorContains(t, w.checkVia(anon, base, from, to), "HTTP 401", "anonymous read")
	require.Equal(t, http.StatusForbidden, status(t, reader, base+"/debug/pprof/"), "pprof needs admin")
	require.Equal(t, http.StatusOK, status(t, admin, base+"/debug/pprof/"))
	require.Equal(t, http.StatusUnauthorized, status(t, anon, base+"/api/v1/query?query=up"))
	require.NoError(t, w.checkVia(reader, base, from, to), "after the refused writes")

	// No answer without TLS, or to a client that does not trust the CA.
	resp, err := http.Get(p.http + "/ready")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP on the HTTPS port")
	}
	_, err = client(bench.Security{BearerToken: creds.WriteToken}).Get(base + "/ready")
	require.ErrorContains(t, err, "certificate", "a client that does not trust the cluster CA")

	// tessera bench over HTTPS with the CLI's TLS and credential flags, as
	// docs/security.md shows it: it writes with the write token, then a
	// run with the read user's basic auth reads every sample back.
	benchArgs := []string{p.bin, "bench", "--url", base, "--ca-file", creds.CAFile, "--series", "100", "--samples", "10",
		"--start", strconv.FormatInt(ts.UnixMilli(), 10)}
	out, err = p.exec(2*time.Minute, append(benchArgs, "--bearer-token", creds.WriteToken)...)
	require.NoError(t, err)
	t.Logf("tessera bench over HTTPS:\n%s", strings.TrimSpace(out))
	out, err = p.exec(2*time.Minute, append(benchArgs, "--basic-auth", creds.ReaderUser+":"+creds.ReaderPass, "--verify-only")...)
	require.NoError(t, err)
	require.Contains(t, out, "verify: OK")
	_, err = p.exec(2*time.Minute, append(benchArgs, "--bearer-token", creds.WriteToken, "--verify-only")...)
	require.ErrorContains(t, err, "403", "bench reading with the write token")
}

// status is the HTTP status of a GET through c.
func status(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err, "GET %s", url)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
