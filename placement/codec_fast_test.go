package placement

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// wireOf builds the wire form the way MarshalJSON did before it wrote the
// bytes itself: the reference its output must match byte for byte.
func wireOf(p Placement) wirePlacement {
	w := wirePlacement{
		SchemaVersion: SchemaVersion, Version: p.Version, NumShards: p.NumShards,
		ReplicaFactor: p.ReplicaFactor, IsSharded: p.IsSharded, MaxShardSetID: p.MaxShardSetID,
		Instances: make([]wireInstance, len(p.Instances)),
	}
	for i, in := range p.Instances {
		wi := wireInstance{
			ID: in.ID, IsolationGroup: in.IsolationGroup, Zone: in.Zone, Weight: in.Weight,
			Endpoint: in.Endpoint, HTTPEndpoint: in.HTTPEndpoint, Hostname: in.Hostname, Port: in.Port,
			ShardSetID: in.ShardSetID, Leaving: in.Leaving, Shards: make([]wireShard, len(in.Shards)),
		}
		for j, s := range in.Shards {
			wi.Shards[j] = wireShard(s)
		}
		w.Instances[i] = wi
	}
	return w
}

// TestMarshalMatchesEncodingJSON: the hand-written encoder writes exactly
// what encoding/json writes for the wire types, for any field values
// (strings with quotes, control characters, HTML characters, non-ASCII
// and invalid UTF-8 included), so stored placements do not change.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	str := rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z0-9.:-]{0,12}`),
		rapid.SampledFrom([]string{"", "a\"b", `back\slash`, "<&>", "tab\there", "\x00\x1f", "é", "\u2028", "\xff\xfe", "node4"}))
	rapid.Check(t, func(rt *rapid.T) {
		p := Placement{
			Version:       rapid.Int64().Draw(rt, "version"),
			NumShards:     rapid.Uint32().Draw(rt, "numShards"),
			ReplicaFactor: rapid.IntRange(-3, 5).Draw(rt, "rf"),
			IsSharded:     rapid.Bool().Draw(rt, "sharded"),
			MaxShardSetID: rapid.Uint32().Draw(rt, "maxSetID"),
		}
		for i := range rapid.IntRange(0, 4).Draw(rt, "instances") {
			in := Instance{
				ID: str.Draw(rt, "id"), IsolationGroup: str.Draw(rt, "group"), Zone: str.Draw(rt, "zone"),
				Weight: rapid.Uint32().Draw(rt, "weight"), Endpoint: str.Draw(rt, "endpoint"),
				HTTPEndpoint: str.Draw(rt, "http"), Hostname: str.Draw(rt, "host"),
				Port: rapid.Uint32().Draw(rt, "port"), ShardSetID: rapid.Uint32().Draw(rt, "setID"),
				Leaving: rapid.Bool().Draw(rt, "leaving"),
			}
			if i%2 == 1 {
				in.Shards = []Shard{} // empty, not nil: both write []
			}
			for range rapid.IntRange(0, 6).Draw(rt, "shards") {
				in.Shards = append(in.Shards, Shard{
					ID:           rapid.Uint32().Draw(rt, "shard"),
					State:        rapid.SampledFrom([]ShardState{Initializing, Available, Leaving}).Draw(rt, "state"),
					SourceID:     str.Draw(rt, "source"),
					CutoverNanos: rapid.Int64().Draw(rt, "cutover"),
					CutoffNanos:  rapid.Int64().Draw(rt, "cutoff"),
				})
			}
			p.Instances = append(p.Instances, in)
		}
		want, err := json.Marshal(wireOf(p))
		require.NoError(rt, err)
		got, err := p.MarshalJSON()
		require.NoError(rt, err)
		require.Equal(rt, string(want), string(got))
		viaJSON, err := json.Marshal(p) // encoding/json's check of a Marshaler's output
		require.NoError(rt, err)
		require.Equal(rt, string(want), string(viaJSON))
	})
}

// The joined three-node example, with real IDs and stamps, is byte for
// byte what encoding/json wrote, and a state that cannot be stored is
// refused as before.
func TestMarshalJoinedExampleUnchanged(t *testing.T) {
	p := MarkAllAvailable(mustInit(t, cluster(3, 3), 4096, 3))
	p, err := Add(p, inst("i003", "g0", 1))
	require.NoError(t, err)
	p = stamp(Placement{}, p, time.Unix(1_790_000_000, 0))
	p.Version = 41
	got, err := encodeStored(p)
	require.NoError(t, err)
	p.Version = 0 // the stored value leaves the version to etcd
	want, err := json.Marshal(wireOf(p))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))

	p.Instances[0].Shards[0].State = Absent
	_, err = p.MarshalJSON()
	require.ErrorContains(t, err, "cannot be stored")
	_, err = json.Marshal(wireOf(p))
	require.ErrorContains(t, err, "cannot be stored")
}

// TestParseWireMatchesEncodingJSON: whatever the fast reader accepts,
// encoding/json decodes to the same placement: every placement
// MarshalJSON writes with plain ASCII strings (which it must accept), and
// those bytes changed, cut or inserted into (which it must either read
// identically or leave to encoding/json).
func TestParseWireMatchesEncodingJSON(t *testing.T) {
	str := rapid.OneOf(rapid.StringMatching(`[a-z0-9.:-]{0,8}`),
		rapid.SampledFrom([]string{"", "a\"b", `back\slash`, "<&>", "é", "\xff"}))
	rapid.Check(t, func(rt *rapid.T) {
		p := Placement{
			Version: rapid.Int64().Draw(rt, "version"), NumShards: rapid.Uint32().Draw(rt, "numShards"),
			ReplicaFactor: rapid.IntRange(-3, 5).Draw(rt, "rf"), IsSharded: rapid.Bool().Draw(rt, "sharded"),
			MaxShardSetID: rapid.Uint32().Draw(rt, "maxSetID"),
		}
		for range rapid.IntRange(0, 3).Draw(rt, "instances") {
			in := Instance{
				ID: str.Draw(rt, "id"), IsolationGroup: str.Draw(rt, "group"), Zone: str.Draw(rt, "zone"),
				Weight: rapid.Uint32().Draw(rt, "weight"), Endpoint: str.Draw(rt, "endpoint"),
				HTTPEndpoint: str.Draw(rt, "http"), Hostname: str.Draw(rt, "host"),
				Port: rapid.Uint32().Draw(rt, "port"), ShardSetID: rapid.Uint32().Draw(rt, "setID"),
				Leaving: rapid.Bool().Draw(rt, "leaving"),
			}
			for range rapid.IntRange(0, 5).Draw(rt, "shards") {
				in.Shards = append(in.Shards, Shard{
					ID:           rapid.Uint32().Draw(rt, "shard"),
					State:        rapid.SampledFrom([]ShardState{Initializing, Available, Leaving}).Draw(rt, "state"),
					SourceID:     str.Draw(rt, "source"),
					CutoverNanos: rapid.Int64().Draw(rt, "cutover"),
					CutoffNanos:  rapid.Int64().Draw(rt, "cutoff"),
				})
			}
			p.Instances = append(p.Instances, in)
		}
		data, err := p.MarshalJSON()
		require.NoError(rt, err)
		plain := !bytes.ContainsAny(data, `\`) // no escapes, and only ASCII
		for _, c := range data {
			plain = plain && c < 0x80
		}
		if plain {
			_, ok := parseWire(data)
			require.True(rt, ok, "the canonical form %s takes the fast path", data)
		}
		switch rapid.IntRange(0, 3).Draw(rt, "mutation") {
		case 1:
			i := rapid.IntRange(0, len(data)-1).Draw(rt, "at")
			data = append(append(append([]byte{}, data[:i]...), rapid.Byte().Draw(rt, "byte")), data[i+1:]...)
		case 2:
			data = data[:rapid.IntRange(0, len(data)).Draw(rt, "cut")]
		case 3:
			i := rapid.IntRange(0, len(data)).Draw(rt, "at")
			ins := rapid.SampledFrom([]string{" ", "0", "-", "9", `"`, ",", "}", "]", "null", `\u0041`, "1e3", "true"}).Draw(rt, "insert")
			data = append(append(append([]byte{}, data[:i]...), ins...), data[i:]...)
		}
		w, ok := parseWire(data)
		if !ok {
			return
		}
		var ref wirePlacement
		require.NoError(rt, json.Unmarshal(data, &ref), "the fast reader took %q, which encoding/json refuses", data)
		var got, want Placement
		gotErr, wantErr := got.fromWire(w), want.fromWire(ref)
		require.Equal(rt, wantErr, gotErr)
		require.Equal(rt, want, got, "input %q", data)
	})
}

// A placement decodes the same through the fast path as through
// encoding/json alone.
func TestDecodeJoinedExampleUnchanged(t *testing.T) {
	p := MarkAllAvailable(mustInit(t, cluster(3, 3), 4096, 3))
	p, err := Add(p, inst("i003", "g0", 1))
	require.NoError(t, err)
	p = stamp(Placement{}, p, time.Unix(1_790_000_000, 0))
	data, err := encodeStored(p)
	require.NoError(t, err)
	got, err := decodeStored(data, p.Version)
	require.NoError(t, err)
	require.Equal(t, p, got)
}
