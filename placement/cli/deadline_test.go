package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/placement"
	"github.com/tessera-tsdb/tessera/placement/etcdtest"
)

// TestDeadlineAfterConnectIsNotUnreachable runs a command whose request
// reaches a real etcd that then stops answering: the deadline passes with
// the request in flight. A change must be reported as possibly applied
// (with the way to check), a read as unanswered; neither as unreachable.
func TestDeadlineAfterConnectIsNotUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutates bool
		want    []string
	}{
		{"change", true, []string{"the change may have been applied", "tessera placement get", "within 3s"}},
		{"read", false, []string{"did not answer within 3s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := etcdtest.StartServer(t)
			o := &options{endpoints: srv.Endpoints(), cluster: "deadline", output: "json", timeout: 3 * time.Second}
			cmd := &cobra.Command{}
			cmd.SetContext(context.Background())
			var reached bool
			err := o.run(cmd, tc.mutates, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
				// The connection is up: etcd answers this read.
				_, err := s.Get(ctx)
				require.ErrorIs(t, err, placement.ErrNotFound)
				reached = true
				// Now etcd goes away with the next request on its way;
				// the client waits for it until the deadline.
				srv.Stop()
				if !tc.mutates {
					return s.Get(ctx)
				}
				return s.Init(ctx, []placement.Instance{{ID: "a", IsolationGroup: "r1", Weight: 1, Endpoint: "127.0.0.1:9001"}}, 8, 1)
			})
			require.True(t, reached)
			require.Error(t, err)
			msg := err.Error()
			require.NotContains(t, msg, "unreachable")
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
			require.NotContains(t, msg, "\n")
		})
	}
}

// TestConnectFailureIsUnreachable: nothing listens at the endpoint, so
// nothing can have been sent and the error says unreachable.
func TestConnectFailureIsUnreachable(t *testing.T) {
	srv := etcdtest.StartServer(t)
	addr := srv.Endpoints()[0]
	srv.Stop()
	o := &options{endpoints: []string{addr}, cluster: "x", output: "json", timeout: time.Second}
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	called := false
	err := o.run(cmd, true, func(ctx context.Context, s *placement.Store) (placement.Placement, error) {
		called = true
		return placement.Placement{}, nil
	})
	require.False(t, called, "fn must not run without a connection")
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "etcd unreachable at "+addr+" within 1s"), err.Error())
}
