package placement

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// small is a valid, settled-but-moving placement: 4 shards, RF 2, with
// shard 0 moving from a to c.
func small() Placement {
	return Placement{
		NumShards: 4, ReplicaFactor: 2, IsSharded: true, MaxShardSetID: 3,
		Instances: []Instance{
			{ID: "a", IsolationGroup: "r1", Weight: 1, Endpoint: "a:9000", ShardSetID: 1, Shards: []Shard{
				{ID: 0, State: Leaving}, {ID: 1, State: Available}, {ID: 2, State: Available}}},
			{ID: "b", IsolationGroup: "r2", Weight: 1, Endpoint: "b:9000", ShardSetID: 2, Shards: []Shard{
				{ID: 0, State: Available}, {ID: 1, State: Available}, {ID: 2, State: Available}, {ID: 3, State: Available}}},
			{ID: "c", IsolationGroup: "r1", Weight: 1, Endpoint: "c:9000", ShardSetID: 3, Shards: []Shard{
				{ID: 0, State: Initializing, SourceID: "a"}, {ID: 3, State: Available}}},
		},
	}
}

func TestValidate(t *testing.T) {
	require.NoError(t, small().Validate())
	tests := []struct {
		name   string
		mutate func(p *Placement)
		want   string
	}{
		{"no shards", func(p *Placement) { p.NumShards = 0 }, "numShards must be positive"},
		{"rf zero", func(p *Placement) { p.ReplicaFactor = 0 }, "replicaFactor must be at least 1"},
		{"unsharded", func(p *Placement) { p.IsSharded = false }, "unsharded"},
		{"duplicate instance", func(p *Placement) { p.Instances[1].ID = "a" }, `instance "a" appears twice`},
		{"unsorted", func(p *Placement) { p.Instances[0], p.Instances[1] = p.Instances[1], p.Instances[0] }, "not sorted"},
		{"no endpoint", func(p *Placement) { p.Instances[1].Endpoint = "" }, "endpoint: missing"},
		{"bad endpoint", func(p *Placement) { p.Instances[1].Endpoint = "b" }, "not host:port"},
		{"no group", func(p *Placement) { p.Instances[1].IsolationGroup = "" }, "no isolation group"},
		{"zero weight", func(p *Placement) { p.Instances[1].Weight = 0 }, "weight must be at least 1"},
		{"shard set id", func(p *Placement) { p.Instances[1].ShardSetID = 9 }, "above maxShardSetID"},
		{"shared shard set id", func(p *Placement) { p.Instances[1].ShardSetID = 1 }, "share shardSetID 1"},
		{"shard out of range", func(p *Placement) { p.Instances[1].Shards[3].ID = 4 }, "shard 4 out of range"},
		{"too few replicas", func(p *Placement) { p.Instances[1].Shards = p.Instances[1].Shards[:3] }, "shard 3 has 1 non-LEAVING owners, want 2"},
		{"same group", func(p *Placement) { p.Instances[1].IsolationGroup = "r1" }, `two owners in isolation group "r1"`},
		{"source not leaving", func(p *Placement) { p.Instances[0].Shards[0].State = Available }, "two owners"},
		{"source unknown", func(p *Placement) { p.Instances[2].Shards[0].SourceID = "zz" }, `unknown instance "zz"`},
		{"leaving unpaired", func(p *Placement) { p.Instances[2].Shards[0].SourceID = "" }, "source of 0 INITIALIZING copies"},
		{"available with source", func(p *Placement) { p.Instances[1].Shards[0].SourceID = "a" }, "has sourceID"},
		{"leaving instance owns", func(p *Placement) { p.Instances[1].Leaving = true }, "leaving instance holds shard 0 AVAILABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := small().Clone()
			tt.mutate(&p)
			err := p.Validate()
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	p := small()
	p.Version = 42
	p.Instances[0].HTTPEndpoint = "a:7201"
	p.Instances[2].Shards[0].CutoverNanos = 123
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.Contains(t, string(b), `"schemaVersion":1`)
	require.Contains(t, string(b), `"state":"INITIALIZING","sourceID":"a","cutoverNanos":123`)
	var got Placement
	require.NoError(t, json.Unmarshal(b, &got))
	requireSame(t, p, got, "round trip")
	require.Equal(t, int64(42), got.Version)
}

func TestJSONRejectsUnknownSchemaAndState(t *testing.T) {
	var p Placement
	require.ErrorContains(t, json.Unmarshal([]byte(`{"schemaVersion":2}`), &p), "schema version 2 not supported")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"schemaVersion":0}`), &p), "schema version 0 not supported")
	err := json.Unmarshal([]byte(`{"schemaVersion":1,"instances":[{"id":"a","shards":[{"id":0,"state":"GONE"}]}]}`), &p)
	require.ErrorContains(t, err, `unknown shard state "GONE"`)
}

func TestTransitionWhitelist(t *testing.T) {
	allowed := map[[2]ShardState]bool{
		{Absent, Initializing}:    true,
		{Initializing, Available}: true,
		{Available, Leaving}:      true,
		{Leaving, Available}:      true,
		{Leaving, Absent}:         true,
		{Initializing, Absent}:    true,
	}
	for from := Absent; from <= Leaving; from++ {
		for to := Absent; to <= Leaving; to++ {
			want := from == to || allowed[[2]ShardState{from, to}]
			require.Equal(t, want, CanTransition(from, to), "%v -> %v", from, to)
		}
	}
	prev := small()
	next := prev.Clone()
	next.Instances[1].Shards[0].State = Leaving // AVAILABLE -> LEAVING: fine
	require.NoError(t, CheckTransitions(prev, next))
	next.Instances[0].Shards[0].State = Initializing // LEAVING -> INITIALIZING: not
	require.ErrorContains(t, CheckTransitions(prev, next), `shard 0 on instance "a": transition LEAVING -> INITIALIZING`)
	gone := prev.Clone()
	gone.Instances[1].Shards = gone.Instances[1].Shards[1:] // AVAILABLE -> absent: not
	require.ErrorContains(t, CheckTransitions(prev, gone), "AVAILABLE -> ABSENT")
}

func TestLookups(t *testing.T) {
	p := small()
	owners := ShardOwners(p, 0)
	require.Equal(t, []Owner{
		{InstanceID: "a", IsolationGroup: "r1", Endpoint: "a:9000", State: Leaving},
		{InstanceID: "b", IsolationGroup: "r2", Endpoint: "b:9000", State: Available},
		{InstanceID: "c", IsolationGroup: "r1", Endpoint: "c:9000", State: Initializing, SourceID: "a"},
	}, owners)
	idx := IndexOwners(p)
	for s := range p.NumShards {
		require.Equal(t, ShardOwners(p, s), idx.Owners(s))
	}
	require.Nil(t, idx.Owners(99))

	shards, ok := InstanceShards(p, "c")
	require.True(t, ok)
	require.Equal(t, []Shard{{ID: 0, State: Initializing, SourceID: "a"}, {ID: 3, State: Available}}, shards)
	_, ok = InstanceShards(p, "zz")
	require.False(t, ok)
	require.Equal(t, 1, MovingShards(p))
}
