package cli

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/internal/tlsfiles"

	"github.com/tessera-tsdb/tessera/placement"
	"github.com/tessera-tsdb/tessera/placement/etcdtest"
)

type result struct {
	code           int
	stdout, stderr string
}

// run execs the CLI binary with the given arguments.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return runEnv(t, nil, args...)
}

// cli runs a command against the test etcd.
type cli struct {
	t         *testing.T
	endpoints string
}

func (c cli) ok(args ...string) string {
	c.t.Helper()
	r := run(c.t, append([]string{"--endpoints", c.endpoints, "--cluster", "e2e"}, args...)...)
	require.Zero(c.t, r.code, "%v: stderr %s", args, r.stderr)
	require.Empty(c.t, r.stderr)
	return r.stdout
}

func (c cli) json(args ...string) placement.Placement {
	c.t.Helper()
	var p placement.Placement
	require.NoError(c.t, json.Unmarshal([]byte(c.ok(append(args, "-o", "json")...)), &p))
	require.NoError(c.t, p.Validate())
	return p
}

// fail runs a command that must fail and returns its one-line reason.
func (c cli) fail(args ...string) string {
	c.t.Helper()
	r := run(c.t, append([]string{"--endpoints", c.endpoints, "--cluster", "e2e"}, args...)...)
	require.NotZero(c.t, r.code, "%v should fail; stdout %s", args, r.stdout)
	requireOneLine(c.t, r.stderr)
	return r.stderr
}

func requireOneLine(t *testing.T, stderr string) {
	t.Helper()
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr, got %q", stderr)
	require.True(t, strings.HasPrefix(stderr, "Error: "), "got %q", stderr)
}

func TestCLIEndToEnd(t *testing.T) {
	c := cli{t: t, endpoints: strings.Join(etcdtest.Start(t), ",")}

	require.Contains(t, c.fail("get"), "placement not found")

	p := c.json("init", "--rf", "2", "--shards", "64",
		"--instance", "id=a,group=r1,zone=z,endpoint=127.0.0.1:9001,http=127.0.0.1:7201",
		"--instance", "id=b,group=r2,zone=z,endpoint=127.0.0.1:9002",
		"--instance", "id=c,group=r3,zone=z,weight=2,endpoint=127.0.0.1:9003")
	require.Equal(t, uint32(64), p.NumShards)
	require.Positive(t, p.Version)
	a, _ := p.Instance("a")
	require.Equal(t, "127.0.0.1:7201", a.HTTPEndpoint)
	require.Equal(t, 128, placement.MovingShards(p))

	require.Contains(t, c.fail("init", "--rf", "1", "--shards", "64", "--instance", "id=x,group=r,endpoint=h:1"), "placement already exists")
	require.Contains(t, c.fail("add", "--instance", "id=d,group=r1,endpoint=127.0.0.1:9004"), "shards are still moving")

	for _, id := range []string{"a", "b", "c"} {
		p = c.json("mark-available", id)
	}
	require.Zero(t, placement.MovingShards(p))

	table := c.ok("get")
	require.Contains(t, table, "cluster e2e  version ")
	require.Contains(t, table, "shards moving: 0")
	require.Regexp(t, `(?m)^c\s+r3\s+z\s+2\s+127\.0\.0\.1:9003\s+0\s+\d+\s+0\s*$`, table)

	p = c.json("add", "--instance", "id=d,group=r1,endpoint=127.0.0.1:9004")
	d, ok := p.Instance("d")
	require.True(t, ok)
	require.NotEmpty(t, d.Shards)
	require.Contains(t, c.ok("get"), "shards moving: ")

	// Mark one shard, then the rest.
	first := d.Shards[0].ID
	p = c.json("mark-available", "d", "--shard", itoa(first))
	d, _ = p.Instance("d")
	s, _ := d.Shard(first)
	require.Equal(t, placement.Available, s.State)
	p = c.json("mark-available", "d")
	require.Zero(t, placement.MovingShards(p))

	p = c.json("replace", "--leaving", "b", "--instance", "id=e,group=r2,endpoint=127.0.0.1:9005")
	e, _ := p.Instance("e")
	b, _ := p.Instance("b")
	require.True(t, b.Leaving)
	require.Equal(t, len(b.Shards), len(e.Shards))
	c.json("mark-available", "e")

	p = c.json("remove", "d")
	require.Positive(t, placement.MovingShards(p))
	require.Contains(t, c.fail("remove", "a"), "still moving")
	p = c.json("remove", "a", "--force")
	gone, _ := p.Instance("a")
	require.True(t, gone.Leaving)

	got := c.json("get")
	require.Equal(t, p.Version, got.Version)

	// Errors, each on one line.
	require.Contains(t, c.fail("remove", "nope"), `unknown instance "nope"`)
	require.Contains(t, c.fail("add", "--instance", "id=x,grp=r1,endpoint=h:1"), `unknown field "grp"`)
	require.Contains(t, c.fail("add", "--instance", "id=x,group=r1,endpoint=nope"), `field endpoint: "nope" is not host:port`)
	require.Contains(t, c.fail("get", "-o", "yaml"), `want table or json`)
	require.Contains(t, c.fail("mark-available", "e", "--shard", "9999"), "does not hold shard 9999")
}

func TestCLIRefusesTooFewGroups(t *testing.T) {
	c := cli{t: t, endpoints: strings.Join(etcdtest.Start(t), ",")}
	msg := c.fail("init", "--rf", "3", "--instance", "id=a,group=r1,endpoint=h:1", "--instance", "id=b,group=r2,endpoint=h:2")
	require.Contains(t, msg, "not enough isolation groups: 2 isolation group(s) for replica factor 3")
}

func TestCLIEtcdUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	r := run(t, "--endpoints", addr, "--timeout", "1s", "get")
	require.NotZero(t, r.code)
	requireOneLine(t, r.stderr)
	require.Contains(t, r.stderr, "etcd unreachable at "+addr+" within 1s")
}

func itoa(n uint32) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestCLISecuredEtcd: against an etcd with TLS (client certificates
// required) and auth on, the CLI works with the CA, its certificate and
// the password from the environment, and fails with a one-line reason
// without them.
func TestCLISecuredEtcd(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("etcd CA")
	require.NoError(t, err)
	f, err := ca.WriteLeaf(dir, "etcd", "127.0.0.1")
	require.NoError(t, err)
	srv := etcdtest.StartServerTLS(t, etcdtest.TLS{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA})
	ep := strings.Join(srv.Endpoints(), ",")

	// Turn etcd auth on.
	tc, err := tlsfiles.Client(tlsfiles.Files{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA})
	require.NoError(t, err)
	admin, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	etcdtest.EnableAuth(t, admin, "etcd-pw")
	require.NoError(t, admin.Close())

	runEnv := func(env []string, args ...string) result {
		cmd := exec.Command(binary, append([]string{"--endpoints", ep, "--cluster", "e2e", "--timeout", "10s"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return r
	}
	env := []string{"TESSERA_ETCD_CA=" + f.CA, "TESSERA_ETCD_CERT=" + f.Cert, "TESSERA_ETCD_KEY=" + f.Key,
		"TESSERA_ETCD_USERNAME=root", "TESSERA_ETCD_PASSWORD=etcd-pw"}
	r := runEnv(env, "init", "--rf", "1", "--shards", "8", "--instance", "id=a,group=r1,zone=z,endpoint=127.0.0.1:9000")
	require.Zero(t, r.code, r.stderr)
	// The same with flags instead of the environment.
	r = runEnv(nil, "--ca-file", f.CA, "--cert-file", f.Cert, "--key-file", f.Key, "--username", "root", "--password", "etcd-pw", "get")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "127.0.0.1:9000")

	// Wrong password; no user; no CA (plain TLS verification fails).
	r = runEnv(env[:4], "--password", "nope", "get")
	require.NotZero(t, r.code)
	requireOneLine(t, r.stderr)
	require.Contains(t, r.stderr, "authentication failed")
	r = runEnv(env[:3], "get")
	require.NotZero(t, r.code)
	requireOneLine(t, r.stderr)
	// No TLS at all against a TLS-only etcd: said so, not "unreachable".
	r = runEnv(nil, "--timeout", "2s", "get")
	require.NotZero(t, r.code)
	requireOneLine(t, r.stderr)
	require.Contains(t, r.stderr, "requires TLS: pass --ca-file")
	// The CA but no client certificate where etcd requires one.
	r = runEnv(env[:1], "--timeout", "2s", "get")
	require.NotZero(t, r.code)
	requireOneLine(t, r.stderr)
	require.Contains(t, r.stderr, "requires a client certificate")
	r = runEnv(nil, "--ca-file", filepath.Join(dir, "missing.crt"), "get")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "missing.crt")
}

// runEnv execs the CLI binary with extra environment variables.
func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestCLIEnvironment: TESSERA_ETCD_ENDPOINTS and TESSERA_CLUSTER stand in
// for --endpoints and --cluster; the flags win over them.
func TestCLIEnvironment(t *testing.T) {
	endpoints := strings.Join(etcdtest.Start(t), ",")
	env := []string{EnvEndpoints + "=" + endpoints, EnvCluster + "=fromenv"}

	r := runEnv(t, env, "init", "--rf", "1", "--shards", "8", "--instance", "id=a,group=r1,endpoint=127.0.0.1:9001")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "cluster fromenv ")

	r = runEnv(t, env, "get")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "cluster fromenv ")

	// The placement went under the cluster named by the environment.
	require.Contains(t, cli{t: t, endpoints: endpoints}.ok("get", "--cluster", "fromenv"), "instances 1")

	// --cluster wins over TESSERA_CLUSTER.
	r = runEnv(t, env, "get", "--cluster", "other")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "placement not found")

	// --endpoints wins over TESSERA_ETCD_ENDPOINTS.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	r = runEnv(t, env, "get", "--endpoints", dead, "--timeout", "1s")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "etcd unreachable at "+dead)

	// Without the flag, the environment is used: a dead endpoint there
	// fails the same way.
	r = runEnv(t, []string{EnvEndpoints + "=" + dead}, "get", "--timeout", "1s")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "etcd unreachable at "+dead)

	// The help says where the defaults come from.
	r = runEnv(t, env, "--help")
	require.Contains(t, r.stdout, EnvEndpoints)
	require.Contains(t, r.stdout, endpoints)
}
