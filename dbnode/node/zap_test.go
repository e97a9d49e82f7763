package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestEtcdServerLogLevels: embedded etcd's routine start and stop
// messages are demoted to debug; real warnings and errors keep their
// level; everything is one key=value line.
func TestEtcdServerLogLevels(t *testing.T) {
	var buf bytes.Buffer
	z := etcdServerLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	z.Warn("Running http and grpc server on single port. This is not recommended for production.")
	z.Info("raft.node: elected leader")
	z.Warn("leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk")
	z.Error("failed to save snapshot", zap.Error(errors.New("disk full")))
	z.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("accept tcp 127.0.0.1:2379: use of closed network connection")))
	z.Info("closing etcd server")
	z.Warn("lost TCP streaming connection with remote peer", zap.Error(errors.New("context canceled")))
	z.Error("failed to publish", zap.Error(errors.New("etcdserver: request timed out")))
	// The version monitor's first try before a raft term is saved is
	// retried by etcd; any other failure to write the version is an error.
	z.Error("failed to update storage version", zap.String("cluster-version", "3.7.0"), zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	z.Error("failed to update storage version", zap.Error(errors.New("write: no space left on device")))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Contains(t, lines[0], `level=WARN msg="leader failed to send out heartbeat`)
	require.Contains(t, lines[1], `level=ERROR msg="failed to save snapshot" component=etcd error="disk full"`)
	require.Contains(t, lines[2], `level=ERROR msg="failed to publish"`)
	require.Contains(t, lines[3], `level=ERROR msg="failed to update storage version" component=etcd error="write: no space left on device"`)
}

// TestEtcdSlownessWarningsRateLimited: on a loaded machine an embedded
// member repeats its heartbeat and slow-apply warnings several times a
// second; each kind goes out once a minute, the rest at debug, so the
// node's own lines stay readable while the slowness stays visible.
func TestEtcdSlownessWarningsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	z := etcdServerLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for range 50 {
		z.Warn("leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk")
		z.Warn("apply request took too long")
	}
	z.Warn("some other warning")
	z.Warn("some other warning")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4, buf.String())
	require.Equal(t, 1, strings.Count(buf.String(), "heartbeat on time"))
	require.Equal(t, 1, strings.Count(buf.String(), "apply request took too long"))
	require.Equal(t, 2, strings.Count(buf.String(), "some other warning"), "other warnings are not limited")

	p := &etcdServerPolicy{}
	t0 := time.Now()
	require.False(t, p.rateLimited("slow fdatasync", t0))
	require.True(t, p.rateLimited("slow fdatasync", t0.Add(59*time.Second)))
	require.False(t, p.rateLimited("slow fdatasync", t0.Add(61*time.Second)), "again after a minute")
}
