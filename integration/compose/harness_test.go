package compose

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-tsdb/tessera/internal/waitfor"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/placement"
)

// repoRoot is the directory holding go.mod, found upwards from the test's
// working directory.
func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "go.mod not found above the test directory")
		dir = parent
	}
}

// findCompose returns the compose command to use ("docker compose" v2 or
// "docker-compose" v1), or why the test cannot run here.
func findCompose() (argv []string, why string) {
	if os.Getenv("TESSERA_COMPOSE_TEST") == "0" {
		return nil, "TESSERA_COMPOSE_TEST=0"
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return nil, "no docker on PATH"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("docker daemon not reachable: %v: %s", err, firstLine(out))
	}
	if exec.CommandContext(ctx, "docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, ""
	}
	if _, err := exec.LookPath("docker-compose"); err == nil && exec.CommandContext(ctx, "docker-compose", "version").Run() == nil {
		return []string{"docker-compose"}, ""
	}
	return nil, "neither `docker compose` nor `docker-compose` works"
}

// composeOrSkip returns the compose command, or skips the test saying why
// it cannot run here (-short, no docker or compose, TESSERA_COMPOSE_TEST=0).
func composeOrSkip(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("compose cluster test skipped in -short mode")
	}
	compose, why := findCompose()
	if why != "" {
		t.Skip("compose cluster test skipped: " + why)
	}
	return compose
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// freePort picks a loopback port for compose to publish on: a random one
// below the kernel's ephemeral range (which other tests running in
// parallel draw from all the time), checked free by binding it. Another
// process may still take it before compose binds it; up retries then.
func freePort(t testing.TB) int {
	for range 100 {
		port := 20000 + rand.IntN(10000)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatal("no free loopback port in 20000-29999")
	return 0
}

// project is one compose project: the repo's docker-compose.yml started
// under a unique name with its own published ports and image tag.
type project struct {
	t       *testing.T
	compose []string
	name    string
	root    string
	env     []string
	image   string
	bin     string // the host tessera binary, for the placement CLI
	http    string // node1's published HTTP base URL
	etcd    string // node1's published etcd client host:port
	// overrides are compose files applied over docker-compose.yml, in
	// order (docker-compose.secure.yml for the secure cluster).
	overrides []string
}

func newProject(t *testing.T, compose []string) *project {
	root := repoRoot(t)
	id := fmt.Sprintf("%d%04d", os.Getpid(), rand.IntN(10000))
	p := &project{
		t: t, compose: compose, root: root,
		name:  "tesseratest" + id,
		image: "tessera:test" + id,
		bin:   filepath.Join(t.TempDir(), "tessera"),
	}
	p.env = append(os.Environ(),
		"TESSERA_IMAGE="+p.image,
		"TESSERA_BIND=127.0.0.1",
		"TESSERA_BIN="+p.bin,
	)
	if _, err := exec.LookPath("go"); err != nil {
		p.env = append(p.env, "GO="+filepath.Join(runtime.GOROOT(), "bin", "go"))
	}
	p.pickPorts()
	return p
}

// pickPorts chooses node1's published HTTP and etcd ports.
func (p *project) pickPorts() {
	httpPort, etcdPort := freePort(p.t), freePort(p.t)
	for etcdPort == httpPort {
		etcdPort = freePort(p.t)
	}
	p.http = "http://127.0.0.1:" + strconv.Itoa(httpPort)
	p.etcd = "127.0.0.1:" + strconv.Itoa(etcdPort)
	kept := p.env[:0]
	for _, kv := range p.env {
		if !strings.HasPrefix(kv, "TESSERA_HTTP_PORT=") && !strings.HasPrefix(kv, "TESSERA_ETCD_PORT=") {
			kept = append(kept, kv)
		}
	}
	p.env = append(kept, "TESSERA_HTTP_PORT="+strconv.Itoa(httpPort), "TESSERA_ETCD_PORT="+strconv.Itoa(etcdPort))
}

// up starts the cluster. Ports are chosen just before (the build takes
// minutes), and if one was taken meanwhile the project is taken down and
// started again on new ones.
func (p *project) up() {
	p.t.Helper()
	for attempt := 1; ; attempt++ {
		p.pickPorts()
		_, err := p.dc(5*time.Minute, "up", "-d")
		if err == nil {
			return
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			require.NoError(p.t, err)
		}
		p.t.Logf("compose up: a published port was taken, retrying on new ones: %v", firstLine([]byte(err.Error())))
		_, derr := p.dc(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5")
		require.NoError(p.t, derr)
	}
}

// exec runs a command in the repo root with the project's environment
// and returns its combined output; err carries the output's tail.
func (p *project) exec(timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.root
	cmd.Env = p.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		tail := out.String()
		if len(tail) > 2000 {
			tail = "..." + tail[len(tail)-2000:]
		}
		return out.String(), fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, tail)
	}
	return out.String(), nil
}

// dc runs a compose subcommand of this project; profiles go before it.
func (p *project) dc(timeout time.Duration, args ...string) (string, error) {
	argv := append(append([]string{}, p.compose...), "-p", p.name, "-f", filepath.Join(p.root, "docker-compose.yml"))
	for _, f := range p.overrides {
		argv = append(argv, "-f", filepath.Join(p.root, f))
	}
	return p.exec(timeout, append(argv, args...)...)
}

func (p *project) mustDC(timeout time.Duration, args ...string) string {
	p.t.Helper()
	out, err := p.dc(timeout, args...)
	require.NoError(p.t, err)
	return out
}

// build compiles the binary and image with deploy/build.sh and removes the
// image tag again when the test ends.
func (p *project) build() {
	p.t.Cleanup(func() {
		if _, err := p.exec(time.Minute, "docker", "rmi", "-f", p.image); err != nil {
			p.t.Logf("remove image: %v", err)
		}
	})
	_, err := p.exec(20*time.Minute, filepath.Join(p.root, "deploy", "build.sh"))
	require.NoError(p.t, err)
}

// teardownOnCleanup removes every container, network and volume of the
// project when the test ends, pass or fail; on failure it logs the nodes'
// last lines first.
func (p *project) teardownOnCleanup() {
	p.t.Cleanup(func() {
		if p.t.Failed() {
			if out, err := p.dc(time.Minute, "--profile", "node4", "logs", "--no-color", "--tail", "40"); err == nil {
				p.t.Logf("compose logs:\n%s", out)
			}
		}
		if _, err := p.dc(3*time.Minute, "--profile", "node4", "--profile", "tools", "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			p.t.Errorf("compose down: %v", err)
		}
	})
}

// waitSeedsReady waits until node1..node3 are healthy (their container's
// health check, `tessera ready`, passes) and every shard of the placement
// the init service wrote is AVAILABLE, and logs how long that took since
// start.
func (p *project) waitSeedsReady(start time.Time) {
	p.t.Helper()
	eventually(p.t, 3*time.Minute, "node1..node3 healthy and every shard AVAILABLE", func() error {
		for _, s := range []string{"node1", "node2", "node3"} {
			if err := p.healthy(s); err != nil {
				return err
			}
		}
		pl, err := p.placement()
		if err != nil {
			return err
		}
		return settled(pl, "node1", "node2", "node3")
	})
	p.t.Logf("wall time of `up -d` to all three nodes ready: %v", time.Since(start).Round(time.Millisecond))
}

// containerID is the ID of a service's container.
func (p *project) containerID(service string) (string, error) {
	out, err := p.dc(time.Minute, "--profile", "node4", "ps", "-q", service)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(out)
	if id == "" {
		return "", fmt.Errorf("no container for %s", service)
	}
	return id, nil
}

// healthy says whether the service's container runs and its health check
// (tessera ready against /ready) passes.
func (p *project) healthy(service string) error {
	id, err := p.containerID(service)
	if err != nil {
		return err
	}
	out, err := p.exec(time.Minute, "docker", "inspect", "-f", "{{.State.Status}} {{.State.Health.Status}}", id)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(out); s != "running healthy" {
		return fmt.Errorf("%s: %s", service, s)
	}
	return nil
}

// cli runs the host's placement CLI against node1's published etcd port.
//
// A call that could not reach etcd, or got no answer within 20 s
// (a loaded machine running two compose clusters, or etcd electing a
// leader after a member restarted), is tried again for up to a minute. Should the first
// attempt have landed after all, the retry fails loudly (an add finds the
// instance already there), never silently; any other failure is returned
// as it is.
func (p *project) cli(args ...string) (string, error) {
	// 20 s per attempt, not the CLI's 5 s default: writing the 4096-shard
	// placement (~850 KB) waited longer than 5 s on every try for a whole
	// minute once, with three test suites sharing the machine's disk.
	argv := append([]string{p.bin, "placement", "--endpoints", p.etcd, "--timeout", "20s"}, args...)
	// Polled on a ticker with a deadline, as internal/waitfor polls (which
	// fails the test; here the caller gets the last error instead).
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		out, err := p.exec(30*time.Second, argv...)
		if err == nil || !etcdNotAnswering(err) || time.Now().After(deadline) {
			return out, err
		}
		<-tick.C
	}
}

// etcdNotAnswering reports whether the CLI failed because etcd could not
// be reached ("etcd unreachable") or did not answer in time ("did not
// answer within", also while etcd elects a leader: connected, no answer).
func etcdNotAnswering(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "etcd unreachable") || strings.Contains(msg, "did not answer within")
}

// placement reads the placement through the CLI's JSON output.
func (p *project) placement() (placement.Placement, error) {
	out, err := p.cli("get", "-o", "json")
	if err != nil {
		return placement.Placement{}, err
	}
	var pl placement.Placement
	if err := pl.UnmarshalJSON([]byte(out)); err != nil {
		return placement.Placement{}, fmt.Errorf("placement get -o json: %w", err)
	}
	return pl, nil
}

// settled is nil when the placement has the given instances and no shard
// is INITIALIZING or LEAVING.
func settled(pl placement.Placement, ids ...string) error {
	var have []string
	for _, in := range pl.Instances {
		have = append(have, in.ID)
		c := in.CountByState()
		if c[placement.Initializing] > 0 || c[placement.Leaving] > 0 {
			return fmt.Errorf("version %d: %s has %d INITIALIZING, %d LEAVING shards",
				pl.Version, in.ID, c[placement.Initializing], c[placement.Leaving])
		}
	}
	if strings.Join(have, ",") != strings.Join(ids, ",") {
		return fmt.Errorf("version %d: instances %v, want %v", pl.Version, have, ids)
	}
	return nil
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	waitfor.Condition(t, d, 250*time.Millisecond, what, cond)
}
