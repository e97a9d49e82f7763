package repair

import (
	"testing"
	"time"
)

// FuzzDecodeState: any bytes in the state file give a state or an error,
// never a panic, and a state that decodes re-encodes to one that decodes
// the same.
func FuzzDecodeState(f *testing.F) {
	good := state{Version: stateVersion, Pass: Pass{Number: 2, Started: time.Unix(100, 0).UTC()},
		Shards: map[string]ShardResult{"default/3": {Namespace: "default", Shard: 3, Pass: 2}}}
	b, _ := good.encode()
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"shards":{"x/1":{"namespace":"default","shard":1}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := decodeState(in)
		if err != nil {
			return
		}
		if s.Shards == nil {
			t.Fatal("decoded state without a shard map")
		}
		out, err := s.encode()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := decodeState(out); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
