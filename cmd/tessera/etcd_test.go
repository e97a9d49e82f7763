package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/tessera-tsdb/tessera/placement/etcdtest"
)

// TestEtcdMembersAndQuorumLoss: `etcd members` lists a three-member
// cluster with its health; with two members stopped it still answers
// (serializable) and says NO QUORUM, and `placement get` says "no quorum"
// where it said "did not answer within 5s"; the stopped members can be
// removed once quorum is back, and add-member prints the config a new
// seed starts with.
func TestEtcdMembersAndQuorumLoss(t *testing.T) {
	servers := etcdtest.StartCluster(t, 3)
	ep := servers[0].Endpoints()[0]
	etcd := func(args ...string) result {
		return runCLI(t, append([]string{"etcd", "--endpoints", ep, "--timeout", "5s"}, args...)...)
	}

	r := etcd("members", "-o", "json")
	require.Zero(t, r.code, r.stderr)
	var ms []struct{ Name, Health string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ms))
	require.Len(t, ms, 3)
	leaders := 0
	for _, m := range ms {
		require.Contains(t, []string{"leader", "follower"}, m.Health, m.Name)
		if m.Health == "leader" {
			leaders++
		}
	}
	require.Equal(t, 1, leaders)
	require.Contains(t, etcd("members").stdout, "members 3  healthy 3  quorum (needs 2)")

	r = runCLI(t, "placement", "--endpoints", ep, "--cluster", "e2e", "init", "--rf", "1", "--shards", "8", "--instance", "id=a,group=r1,zone=z,endpoint=127.0.0.1:9000")
	require.Zero(t, r.code, r.stderr)

	servers[1].Stop()
	servers[2].Stop()
	waitfor.Condition(t, 60*time.Second, 200*time.Millisecond, "m0 to see that it lost its leader", func() error {
		r := etcd("members")
		if r.code != 0 || !strings.Contains(r.stdout, "NO QUORUM") || !strings.Contains(r.stdout, "no leader") {
			return fmt.Errorf("members: rc %d, %s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})

	r = runCLI(t, "placement", "--endpoints", ep, "--cluster", "e2e", "--timeout", "2s", "get")
	require.NotZero(t, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	require.Contains(t, r.stderr, "etcd has no quorum")
	require.Contains(t, r.stderr, "of 3 members; 2 must answer")

	// Quorum back with m1; m2 (stopped for good) is removed.
	servers[1].Restart()
	waitfor.Condition(t, 60*time.Second, 200*time.Millisecond, "remove-member m2 once quorum is back", func() error {
		if r := etcd("remove-member", "m2"); r.code != 0 {
			return fmt.Errorf("remove-member: %s", r.stderr)
		}
		return nil
	})
	r = etcd("members")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "members 2  healthy 2  quorum (needs 2)")
	require.NotContains(t, r.stdout, "m2")

	// etcd refuses a member change until the members have been connected
	// for a while (its strict reconfiguration check).
	waitfor.Condition(t, 60*time.Second, 200*time.Millisecond, "add-member m3", func() error {
		if r = etcd("add-member", "m3", "--peer-url", "http://127.0.0.1:1"); r.code != 0 {
			return fmt.Errorf("add-member: %s", r.stderr)
		}
		return nil
	})
	require.Contains(t, r.stdout, "initialClusterState: existing")
	require.Contains(t, r.stdout, "m3=http://127.0.0.1:1")
	require.Contains(t, etcd("members").stdout, "not started")

	r = etcd("remove-member", "nosuch")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, `no etcd member named "nosuch"`)
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI execs the tessera binary and returns its exit code and output.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}
