package placement

import (
	"encoding/json"
	"fmt"
)

// SchemaVersion is the version of the JSON encoding written by Marshal.
// Unmarshal refuses newer versions rather than silently dropping fields.
const SchemaVersion = 1

// The wire types keep the JSON names (docs/format/placement.md) apart from
// the Go field names, so either can change without surprising the other.
type wirePlacement struct {
	SchemaVersion int            `json:"schemaVersion"`
	Version       int64          `json:"version,omitempty"`
	NumShards     uint32         `json:"numShards"`
	ReplicaFactor int            `json:"replicaFactor"`
	IsSharded     bool           `json:"isSharded"`
	MaxShardSetID uint32         `json:"maxShardSetID"`
	Instances     []wireInstance `json:"instances"`
}

type wireInstance struct {
	ID             string      `json:"id"`
	IsolationGroup string      `json:"isolationGroup"`
	Zone           string      `json:"zone,omitempty"`
	Weight         uint32      `json:"weight"`
	Endpoint       string      `json:"endpoint"`
	HTTPEndpoint   string      `json:"httpEndpoint,omitempty"`
	Hostname       string      `json:"hostname,omitempty"`
	Port           uint32      `json:"port,omitempty"`
	ShardSetID     uint32      `json:"shardSetID"`
	Leaving        bool        `json:"leaving,omitempty"`
	Shards         []wireShard `json:"shards"`
}

type wireShard struct {
	ID           uint32     `json:"id"`
	State        ShardState `json:"state"`
	SourceID     string     `json:"sourceID,omitempty"`
	CutoverNanos int64      `json:"cutoverNanos,omitempty"`
	CutoffNanos  int64      `json:"cutoffNanos,omitempty"`
}

// MarshalJSON writes the versioned encoding, Version included when set. The
// store clears Version before writing: in etcd the version is the key's
// ModRevision, not part of the value.
func (p Placement) MarshalJSON() ([]byte, error) {
	w := wirePlacement{
		SchemaVersion: SchemaVersion,
		Version:       p.Version,
		NumShards:     p.NumShards,
		ReplicaFactor: p.ReplicaFactor,
		IsSharded:     p.IsSharded,
		MaxShardSetID: p.MaxShardSetID,
		Instances:     make([]wireInstance, len(p.Instances)),
	}
	for i, in := range p.Instances {
		wi := wireInstance{
			ID:             in.ID,
			IsolationGroup: in.IsolationGroup,
			Zone:           in.Zone,
			Weight:         in.Weight,
			Endpoint:       in.Endpoint,
			HTTPEndpoint:   in.HTTPEndpoint,
			Hostname:       in.Hostname,
			Port:           in.Port,
			ShardSetID:     in.ShardSetID,
			Leaving:        in.Leaving,
			Shards:         make([]wireShard, len(in.Shards)),
		}
		for j, s := range in.Shards {
			wi.Shards[j] = wireShard(s)
		}
		w.Instances[i] = wi
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes and puts instances and shards
// in canonical order. It does not Validate.
func (p *Placement) UnmarshalJSON(b []byte) error {
	var w wirePlacement
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decode placement: %w", err)
	}
	if w.SchemaVersion < 1 || w.SchemaVersion > SchemaVersion {
		return fmt.Errorf("decode placement: schema version %d not supported (this build reads up to %d)", w.SchemaVersion, SchemaVersion)
	}
	out := Placement{
		NumShards:     w.NumShards,
		ReplicaFactor: w.ReplicaFactor,
		IsSharded:     w.IsSharded,
		MaxShardSetID: w.MaxShardSetID,
		Version:       w.Version,
		Instances:     make([]Instance, len(w.Instances)),
	}
	for i, wi := range w.Instances {
		in := Instance{
			ID:             wi.ID,
			IsolationGroup: wi.IsolationGroup,
			Zone:           wi.Zone,
			Weight:         wi.Weight,
			Endpoint:       wi.Endpoint,
			HTTPEndpoint:   wi.HTTPEndpoint,
			Hostname:       wi.Hostname,
			Port:           wi.Port,
			ShardSetID:     wi.ShardSetID,
			Leaving:        wi.Leaving,
			Shards:         make([]Shard, len(wi.Shards)),
		}
		for j, s := range wi.Shards {
			in.Shards[j] = Shard(s)
		}
		out.Instances[i] = in
	}
	sortInstances(out.Instances)
	*p = out
	return nil
}
