package placement

import (
	"encoding/json"
	"fmt"
	"strconv"
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
//
// The bytes are exactly encoding/json's for the wire types above (field
// order, omitempty, escaping; TestMarshalMatchesEncodingJSON), written
// directly: a placement of 4096 shards x RF 3 is ~14,000 shard objects,
// and reflecting over each (plus a MarshalText allocation per state) cost
// every placement change ~10 ms at idle, several times that on a loaded
// box, on the path of each join (the CLI's write, the mark-available CAS).
func (p Placement) MarshalJSON() ([]byte, error) {
	n := 256
	for _, in := range p.Instances {
		n += 256 + 72*len(in.Shards)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"schemaVersion":`...)
	b = strconv.AppendInt(b, SchemaVersion, 10)
	if p.Version != 0 {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, p.Version, 10)
	}
	b = append(b, `,"numShards":`...)
	b = strconv.AppendUint(b, uint64(p.NumShards), 10)
	b = append(b, `,"replicaFactor":`...)
	b = strconv.AppendInt(b, int64(p.ReplicaFactor), 10)
	b = append(b, `,"isSharded":`...)
	b = strconv.AppendBool(b, p.IsSharded)
	b = append(b, `,"maxShardSetID":`...)
	b = strconv.AppendUint(b, uint64(p.MaxShardSetID), 10)
	b = append(b, `,"instances":[`...)
	for i, in := range p.Instances {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendInstance(b, in); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

func appendInstance(b []byte, in Instance) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, in.ID)
	b = append(b, `,"isolationGroup":`...)
	b = appendString(b, in.IsolationGroup)
	if in.Zone != "" {
		b = append(b, `,"zone":`...)
		b = appendString(b, in.Zone)
	}
	b = append(b, `,"weight":`...)
	b = strconv.AppendUint(b, uint64(in.Weight), 10)
	b = append(b, `,"endpoint":`...)
	b = appendString(b, in.Endpoint)
	if in.HTTPEndpoint != "" {
		b = append(b, `,"httpEndpoint":`...)
		b = appendString(b, in.HTTPEndpoint)
	}
	if in.Hostname != "" {
		b = append(b, `,"hostname":`...)
		b = appendString(b, in.Hostname)
	}
	if in.Port != 0 {
		b = append(b, `,"port":`...)
		b = strconv.AppendUint(b, uint64(in.Port), 10)
	}
	b = append(b, `,"shardSetID":`...)
	b = strconv.AppendUint(b, uint64(in.ShardSetID), 10)
	if in.Leaving {
		b = append(b, `,"leaving":true`...)
	}
	b = append(b, `,"shards":[`...)
	for j, s := range in.Shards {
		if j > 0 {
			b = append(b, ',')
		}
		state, err := s.State.MarshalText()
		if err != nil {
			return nil, fmt.Errorf("json: error calling MarshalText for type placement.ShardState: %w", err)
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendUint(b, uint64(s.ID), 10)
		b = append(b, `,"state":"`...)
		b = append(b, state...) // upper-case letters: nothing to escape
		b = append(b, '"')
		if s.SourceID != "" {
			b = append(b, `,"sourceID":`...)
			b = appendString(b, s.SourceID)
		}
		if s.CutoverNanos != 0 {
			b = append(b, `,"cutoverNanos":`...)
			b = strconv.AppendInt(b, s.CutoverNanos, 10)
		}
		if s.CutoffNanos != 0 {
			b = append(b, `,"cutoffNanos":`...)
			b = strconv.AppendInt(b, s.CutoffNanos, 10)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// appendString writes s as encoding/json does: printable ASCII other than
// the quote, the backslash and the HTML-sensitive <, > and & as it is,
// anything else through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// UnmarshalJSON reads what MarshalJSON writes and puts instances and shards
// in canonical order. It does not Validate.
func (p *Placement) UnmarshalJSON(b []byte) error {
	w, ok := parseWire(b)
	if !ok {
		if err := json.Unmarshal(b, &w); err != nil {
			return fmt.Errorf("decode placement: %w", err)
		}
	}
	return p.fromWire(w)
}

// fromWire is UnmarshalJSON once the bytes are read.
func (p *Placement) fromWire(w wirePlacement) error {
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
