package node

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/placement"
)

func TestOwnershipFollowsThePlacement(t *testing.T) {
	p := placement.Placement{NumShards: 8, ReplicaFactor: 1, IsSharded: true, Version: 1, Instances: []placement.Instance{
		{ID: "a", Shards: []placement.Shard{{ID: 0, State: placement.Available}, {ID: 1, State: placement.Initializing}, {ID: 2, State: placement.Leaving}}},
		{ID: "b", Shards: []placement.Shard{{ID: 3, State: placement.Available}}},
	}}
	topo := client.NewTopologyFromMap(client.NewMap(p))
	o := newOwnership(topo, "a")
	for _, tc := range []struct {
		shard     uint32
		op        rpc.Op
		ok        bool
		errSubstr string
	}{
		{0, rpc.OpRead, true, ""},
		{0, rpc.OpWrite, true, ""},
		{1, rpc.OpWrite, true, ""},
		{1, rpc.OpRead, false, "INITIALIZING on a"},
		{2, rpc.OpRead, true, ""},
		{2, rpc.OpWrite, true, ""},
		{3, rpc.OpWrite, false, "not owned by a in placement version 1"},
		{99, rpc.OpRead, false, "not owned by a"},
	} {
		err := o.CheckShard(tc.shard, tc.op)
		if tc.ok {
			require.NoError(t, err, "shard %d op %v", tc.shard, tc.op)
		} else {
			require.ErrorContains(t, err, tc.errSubstr, "shard %d op %v", tc.shard, tc.op)
		}
	}

	// A new placement is seen at once: the table follows the map.
	p.Version = 2
	p.Instances[0].Shards[1].State = placement.Available
	p.Instances[0].Shards = append(p.Instances[0].Shards, placement.Shard{ID: 3, State: placement.Initializing})
	require.NoError(t, topo.Update(p))
	require.NoError(t, o.CheckShard(1, rpc.OpRead))
	require.NoError(t, o.CheckShard(3, rpc.OpWrite))
	require.ErrorContains(t, o.CheckShard(3, rpc.OpRead), "INITIALIZING")

	gone := newOwnership(topo, "zz")
	require.ErrorContains(t, gone.CheckShard(0, rpc.OpWrite), "instance not in placement version 2")
	require.ErrorContains(t, newOwnership(&client.Topology{}, "a").CheckShard(0, rpc.OpWrite), "no placement")
}
