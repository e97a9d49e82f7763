package node

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/placement"
)

func feedPlacement(version int64, state placement.ShardState) placement.Placement {
	return placement.Placement{NumShards: 2, ReplicaFactor: 1, IsSharded: true, Version: version, Instances: []placement.Instance{
		{ID: "a", IsolationGroup: "r1", Weight: 1, Endpoint: "127.0.0.1:1", Shards: []placement.Shard{{ID: 0, State: state}, {ID: 1, State: state}}},
	}}
}

// The feed installs each version once and never an older one, whichever
// source (the watch, the node's own CAS) offers it first; offering does
// not wait for the install (nothing runs the feed yet when the first
// offers are made).
func TestPlacementFeedInstallsNewestOnce(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "placement.json")
	topo, err := client.NewTopology(vfs.OS(), cache)
	require.NoError(t, err)
	sub := topo.Subscribe()
	f := newPlacementFeed(topo, newPlacementGauges(tally.NoopScope, "a"), slog.New(slog.DiscardHandler), "a")

	f.offer(feedPlacement(5, placement.Initializing), "watch")
	f.offer(feedPlacement(3, placement.Initializing), "watch")       // older: dropped
	f.offer(feedPlacement(7, placement.Available), "mark-available") // the CAS result
	f.offer(feedPlacement(7, placement.Available), "watch")          // its echo: dropped
	require.Nil(t, topo.Get(), "offer installs nothing itself")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.run(ctx) }()
	defer func() { cancel(); <-done }()

	select {
	case m := <-sub:
		require.EqualValues(t, 7, m.Placement.Version, "version 5 was overtaken before run looked")
	case <-time.After(30 * time.Second):
		t.Fatal("the offered placement was never installed")
	}
	f.offer(feedPlacement(6, placement.Initializing), "watch")
	f.offer(feedPlacement(8, placement.Available), "watch")
	select {
	case m := <-sub:
		require.EqualValues(t, 8, m.Placement.Version)
	case <-time.After(30 * time.Second):
		t.Fatal("version 8 was never installed")
	}
	require.EqualValues(t, 8, topo.Get().Placement.Version, "version 6 came too late")
	select {
	case m := <-sub:
		t.Fatalf("version %d installed after 8", m.Placement.Version)
	default:
	}
}
