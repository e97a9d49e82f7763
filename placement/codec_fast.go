package placement

import (
	"bytes"
	"math"
)

// parseWire reads the exact form MarshalJSON writes (no whitespace, its
// field order, strings of printable ASCII without escapes) without
// encoding/json, and reports ok false for anything else, which the
// caller then gives to encoding/json (which also says what is wrong).
// Every node's watch decodes each placement change, ~1 MB for 4096 shards
// x RF 3, and encoding/json's scanner alone passes over it twice.
// TestParseWireMatchesEncodingJSON holds both to the same result.
func parseWire(b []byte) (wirePlacement, bool) {
	r := &scan{b: b, ok: true}
	var w wirePlacement
	r.lit(`{"schemaVersion":`)
	w.SchemaVersion = int(r.int64())
	if r.opt(`,"version":`) {
		w.Version = r.int64()
	}
	r.lit(`,"numShards":`)
	w.NumShards = uint32(r.digits(math.MaxUint32))
	r.lit(`,"replicaFactor":`)
	w.ReplicaFactor = int(r.int64())
	r.lit(`,"isSharded":`)
	w.IsSharded = r.opt("true")
	if !w.IsSharded {
		r.lit("false")
	}
	r.lit(`,"maxShardSetID":`)
	w.MaxShardSetID = uint32(r.digits(math.MaxUint32))
	r.lit(`,"instances":[`)
	w.Instances = []wireInstance{}
	if !r.opt("]") {
		for r.ok {
			w.Instances = append(w.Instances, r.instance())
			if r.opt("]") {
				break
			}
			r.lit(",")
		}
	}
	r.lit("}")
	return w, r.ok && r.i == len(b)
}

func (r *scan) instance() wireInstance {
	var in wireInstance
	r.lit(`{"id":"`)
	in.ID = r.str()
	r.lit(`,"isolationGroup":"`)
	in.IsolationGroup = r.str()
	if r.opt(`,"zone":"`) {
		in.Zone = r.str()
	}
	r.lit(`,"weight":`)
	in.Weight = uint32(r.digits(math.MaxUint32))
	r.lit(`,"endpoint":"`)
	in.Endpoint = r.str()
	if r.opt(`,"httpEndpoint":"`) {
		in.HTTPEndpoint = r.str()
	}
	if r.opt(`,"hostname":"`) {
		in.Hostname = r.str()
	}
	if r.opt(`,"port":`) {
		in.Port = uint32(r.digits(math.MaxUint32))
	}
	r.lit(`,"shardSetID":`)
	in.ShardSetID = uint32(r.digits(math.MaxUint32))
	in.Leaving = r.opt(`,"leaving":true`)
	r.lit(`,"shards":[`)
	in.Shards = make([]wireShard, 0, bytes.Count(r.rest(`]`), []byte(`{"id":`)))
	if !r.opt("]") {
		for r.ok {
			in.Shards = append(in.Shards, r.shard())
			if r.opt("]") {
				break
			}
			r.lit(",")
		}
	}
	r.lit("}")
	return in
}

func (r *scan) shard() wireShard {
	var s wireShard
	r.lit(`{"id":`)
	s.ID = uint32(r.digits(math.MaxUint32))
	r.lit(`,"state":"`)
	if state := r.raw(); r.ok && s.State.UnmarshalText(state) != nil {
		r.ok = false // encoding/json says why
	}
	if r.opt(`,"sourceID":"`) {
		s.SourceID = r.str()
	}
	if r.opt(`,"cutoverNanos":`) {
		s.CutoverNanos = r.int64()
	}
	if r.opt(`,"cutoffNanos":`) {
		s.CutoffNanos = r.int64()
	}
	r.lit("}")
	return s
}

// scan is a cursor over the canonical form; ok false means "not that
// form", never "invalid JSON".
type scan struct {
	b  []byte
	i  int
	ok bool
}

func (r *scan) lit(s string) {
	if !r.opt(s) {
		r.ok = false
	}
}

// opt consumes s when it comes next.
func (r *scan) opt(s string) bool {
	if r.ok && len(r.b)-r.i >= len(s) && string(r.b[r.i:r.i+len(s)]) == s {
		r.i += len(s)
		return true
	}
	return false
}

// rest is the input from the cursor to the first stop (a size hint).
func (r *scan) rest(stop string) []byte {
	if j := bytes.Index(r.b[r.i:], []byte(stop)); j >= 0 {
		return r.b[r.i : r.i+j]
	}
	return nil
}

// digits reads 0 or [1-9][0-9]*, at most max.
func (r *scan) digits(max uint64) uint64 {
	if !r.ok || r.i >= len(r.b) || r.b[r.i] < '0' || r.b[r.i] > '9' {
		r.ok = false
		return 0
	}
	if r.b[r.i] == '0' {
		r.i++
		if r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			r.ok = false
		}
		return 0
	}
	var v uint64
	for ; r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9'; r.i++ {
		d := uint64(r.b[r.i] - '0')
		if v > (max-d)/10 {
			r.ok = false
			return 0
		}
		v = v*10 + d
	}
	return v
}

func (r *scan) int64() int64 {
	if r.opt("-") {
		return int64(-r.digits(1 << 63)) // -(1<<63) wraps to math.MinInt64
	}
	return int64(r.digits(math.MaxInt64))
}

// str reads a string up to its closing quote: printable ASCII without
// escapes only.
func (r *scan) str() string { return string(r.raw()) }

// raw is str without the copy: the bytes stay the input's.
func (r *scan) raw() []byte {
	start := r.i
	for ; r.ok && r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; {
		case c == '"':
			r.i++
			return r.b[start : r.i-1]
		case c < 0x20 || c > 0x7e || c == '\\':
			r.ok = false
		}
	}
	r.ok = false
	return nil
}
