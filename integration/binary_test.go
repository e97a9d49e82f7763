package integration

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/placement"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// tesseraBinary builds cmd/tessera once per test run.
func tesseraBinary(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tessera-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "tessera")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/tessera").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// binaryNode runs the real tessera binary as its own process on its
// embedded default layout (seed with embedded etcd, auto-init), on free
// loopback ports.
type binaryNode struct {
	t    *testing.T
	bin  string
	dir  string
	conf string
	http string
	cmd  *exec.Cmd
}

func newBinaryNode(t *testing.T) *binaryNode { return newBinaryNodeOn(t, "") }

// newBinaryNodeOn is newBinaryNode with its data directory at dataDir
// ("": beside its configuration, in a test temp directory).
func newBinaryNodeOn(t *testing.T, dataDir string) *binaryNode {
	dir := t.TempDir()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	b := &binaryNode{t: t, bin: tesseraBinary(t), dir: dir, http: freePort(t)}
	etcdClient := freePort(t)
	conf := fmt.Sprintf(`id: solo
dataDir: %s
http:
  listen: %s
rpc:
  listen: %s
commitlog:
  mode: sync
cluster:
  autoInit: true
etcd:
  endpoints: [%s]
  embedded:
    enabled: true
    clientURL: http://%s
    peerURL: http://%s
`, dataDir, b.http, freePort(t), etcdClient, etcdClient, freePort(t))
	b.conf = filepath.Join(dir, "node.yml")
	require.NoError(t, os.WriteFile(b.conf, []byte(conf), 0o644))
	return b
}

func (b *binaryNode) start() {
	b.cmd = exec.Command(b.bin, "node", "-f", b.conf)
	logf, err := os.Create(filepath.Join(b.dir, fmt.Sprintf("node-%d.log", time.Now().UnixNano())))
	require.NoError(b.t, err)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	require.NoError(b.t, b.cmd.Start())
	cmd := b.cmd
	b.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		logf.Close()
		if b.t.Failed() {
			// The temp dir goes with the test: say what the node said.
			if out, err := os.ReadFile(logf.Name()); err == nil {
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				b.t.Logf("%s (%s), last lines of its log:\n%s", b.conf, cmd.ProcessState, strings.Join(lines[max(0, len(lines)-25):], "\n"))
			}
		}
	})
	eventually(b.t, 60*time.Second, "binary node ready", func() error {
		resp, err := http.Get("http://" + b.http + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("ready: %d", resp.StatusCode)
		}
		return nil
	})
}

func (b *binaryNode) kill9() {
	require.NoError(b.t, b.cmd.Process.Signal(syscall.SIGKILL))
	_ = b.cmd.Wait()
}

func TestBinarySIGKILLKeepsAcknowledgedWrites(t *testing.T) {
	b := newBinaryNode(t)
	b.start()
	url := "http://" + b.http
	d := newDataset()
	now := time.Now().UnixMilli()
	// Writers keep going while the node is killed: every write that got a
	// 2xx before the kill must be there after the restart.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := d.write(url, w*250, 250, now-30_000+int64(k)); err != nil {
					return // the node died under us: unacknowledged
				}
			}
		}(w)
	}
	eventually(t, 30*time.Second, "writes acknowledged", func() error {
		if d.total() < 20_000 {
			return fmt.Errorf("%d samples acknowledged", d.total())
		}
		return nil
	})
	b.kill9()
	close(stop)
	wg.Wait()
	acked := d.total()
	b.start()
	require.NoError(t, d.check(url, 0, math.MaxInt64))
	t.Logf("%d acknowledged samples all read back after SIGKILL and restart", acked)
}

// TestJoiningBinaryKilledMidBootstrapFinishes adds a node running the real
// binary, SIGKILLs it while it streams its shards, and restarts it: it
// finishes the bootstrap and its shards become AVAILABLE.
func TestJoiningBinaryKilledMidBootstrapFinishes(t *testing.T) {
	e, nodes, c := cluster3(t)
	d := newDataset()
	for k := 0; k < 20; k++ {
		require.NoError(t, d.write(nodes[k%3].url(), 0, 200, time.Now().UnixMilli()-60_000+int64(k)))
	}
	l := startLoad(t, d, func() []string { return []string{nodes[0].url(), nodes[1].url(), nodes[2].url()} }, 100)
	dir := t.TempDir()
	b := &binaryNode{t: t, bin: tesseraBinary(t), dir: dir, http: freePort(t)}
	rpcAddr := freePort(t)
	writeConf := func(rate int) {
		conf := fmt.Sprintf(`id: node4
isolationGroup: rack4
dataDir: %s
http:
  listen: %s
rpc:
  listen: %s
etcd:
  endpoints: [%s]
bootstrap:
  maxBytesPerSecond: %d
`, filepath.Join(dir, "data"), b.http, rpcAddr, e.client, rate)
		b.conf = filepath.Join(dir, "node.yml")
		require.NoError(t, os.WriteFile(b.conf, []byte(conf), 0o644))
	}
	writeConf(1) // crawl, so the kill lands mid-bootstrap
	b.cmd = nil
	startNoWait := func() {
		b.cmd = exec.Command(b.bin, "node", "-f", b.conf)
		require.NoError(t, b.cmd.Start())
		t.Cleanup(func() {
			if b.cmd.ProcessState == nil {
				_ = b.cmd.Process.Kill()
				_ = b.cmd.Wait()
			}
		})
	}
	startNoWait()
	n4 := &tnode{cfg: nodes[0].cfg}
	n4.cfg.ID, n4.cfg.IsolationGroup, n4.cfg.RPC.Advertise, n4.cfg.HTTP.Listen = "node4", "rack4", rpcAddr, b.http
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n4.instance()) })
	eventually(t, 30*time.Second, "node4 streaming", func() error {
		resp, err := http.Get("http://" + b.http + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("ready answered %d", resp.StatusCode)
		}
		return nil
	})
	b.kill9()
	require.Greater(t, placement.MovingShards(getPlacement(t, c)), 0, "killed mid-bootstrap")
	writeConf(0)
	startNoWait()
	p := settled(t, c, 120*time.Second)
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes", writes)
	checkEachReplica(t, p, d)
}
