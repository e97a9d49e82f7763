package client

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/placement"
)

// Map is an immutable routing view of one placement version.
type Map struct {
	Placement placement.Placement
	Owners    placement.OwnerIndex
	// Endpoints by instance ID.
	Endpoints map[string]string
	// Sole is the ID of the only instance when the placement has one
	// instance holding every shard AVAILABLE (the embedded default): the
	// session then writes and reads it without per-shard routing.
	Sole string
}

// NewMap indexes a placement for routing.
func NewMap(p placement.Placement) *Map {
	m := &Map{Placement: p, Owners: placement.IndexOwners(p), Endpoints: map[string]string{}}
	for _, in := range p.Instances {
		m.Endpoints[in.ID] = in.Endpoint
	}
	if len(p.Instances) == 1 && uint32(len(p.Instances[0].Shards)) == p.NumShards {
		all := true
		for _, s := range p.Instances[0].Shards {
			all = all && s.State == placement.Available
		}
		if all {
			m.Sole = p.Instances[0].ID
		}
	}
	return m
}

// Topology holds the current placement for the read and write paths. It is
// fed by a watch on etcd and cached on local disk, so a node restarted
// while etcd is down routes by the last placement it saw.
type Topology struct {
	fs        vfs.FS
	cachePath string
	cur       atomic.Pointer[Map]

	mu   sync.Mutex
	subs []chan *Map
}

// NewTopology returns a topology caching to cachePath through fs ("" for
// no cache). It loads the cached placement if there is one.
func NewTopology(fs vfs.FS, cachePath string) (*Topology, error) {
	t := &Topology{fs: fs, cachePath: cachePath}
	if cachePath == "" {
		return t, nil
	}
	b, err := vfs.ReadFile(fs, cachePath)
	if os.IsNotExist(err) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cached placement: %w", err)
	}
	var p placement.Placement
	if err := json.Unmarshal(b, &p); err != nil {
		// A damaged cache must not keep the node down: etcd has the truth.
		return t, nil
	}
	if err := p.Validate(); err != nil {
		return t, nil
	}
	t.cur.Store(NewMap(p))
	return t, nil
}

// Get returns the current map, nil before any placement is known.
func (t *Topology) Get() *Map { return t.cur.Load() }

// Update installs a placement (ignoring one older than the current),
// writes it to the cache and notifies subscribers.
func (t *Topology) Update(p placement.Placement) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur := t.cur.Load(); cur != nil && p.Version != 0 && cur.Placement.Version > p.Version {
		return nil
	}
	m := NewMap(p)
	t.cur.Store(m)
	for _, ch := range t.subs {
		select {
		case ch <- m:
		default:
			// Subscribers only need the latest: replace a pending one.
			select {
			case <-ch:
			default:
			}
			ch <- m
		}
	}
	if t.cachePath == "" {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode placement cache: %w", err)
	}
	if err := vfs.WriteFileAtomic(t.fs, t.cachePath, b); err != nil {
		return fmt.Errorf("write placement cache: %w", err)
	}
	return nil
}

// Subscribe returns a channel that receives the latest map after each
// update (a slow reader skips intermediate versions).
func (t *Topology) Subscribe() <-chan *Map {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := make(chan *Map, 1)
	if m := t.cur.Load(); m != nil {
		ch <- m
	}
	t.subs = append(t.subs, ch)
	return ch
}

// NewTopologyFromMap returns a fixed topology, for tools and tests that
// route by a placement they already hold.
func NewTopologyFromMap(m *Map) *Topology {
	t := &Topology{}
	t.cur.Store(m)
	return t
}
