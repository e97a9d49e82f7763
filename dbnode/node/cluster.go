package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/bootstrap"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
	"github.com/tessera-tsdb/tessera/placement"
)

// ownership answers the RPC server's "may I serve this shard" from the
// cached placement: writes for any copy this node holds, reads for
// AVAILABLE and LEAVING copies (an INITIALIZING copy is still incomplete,
// except that peers streaming from it are never routed to it).
//
// It is asked once per distinct shard of every write batch, so it keeps
// this node's shard states as a table indexed by shard, rebuilt when the
// placement changes, instead of two binary searches per question.
type ownership struct {
	topo  *client.Topology
	id    string
	table atomic.Pointer[ownTable]
}

// ownTable is this node's shard states in one placement version.
type ownTable struct {
	m      *client.Map
	in     bool                   // the instance is in the placement
	states []placement.ShardState // by shard; Absent = not held
}

func newOwnership(topo *client.Topology, id string) *ownership {
	return &ownership{topo: topo, id: id}
}

func (o *ownership) current(m *client.Map) *ownTable {
	if t := o.table.Load(); t != nil && t.m == m {
		return t
	}
	t := &ownTable{m: m, states: make([]placement.ShardState, m.Placement.NumShards)}
	if in, ok := m.Placement.Instance(o.id); ok {
		t.in = true
		for _, s := range in.Shards {
			if s.ID < uint32(len(t.states)) {
				t.states[s.ID] = s.State
			}
		}
	}
	o.table.Store(t)
	return t
}

func (o *ownership) CheckShard(shard uint32, op rpc.Op) error {
	m := o.topo.Get()
	if m == nil {
		return errors.New("no placement known yet")
	}
	t := o.current(m)
	if !t.in {
		return fmt.Errorf("not owned by %s: instance not in placement version %d", o.id, m.Placement.Version)
	}
	var st placement.ShardState
	if shard < uint32(len(t.states)) {
		st = t.states[shard]
	}
	switch {
	case st == placement.Absent:
		return fmt.Errorf("not owned by %s in placement version %d", o.id, m.Placement.Version)
	case op == rpc.OpRead && st == placement.Initializing:
		return fmt.Errorf("INITIALIZING on %s: not readable until bootstrapped", o.id)
	}
	return nil
}

// watchPlacement feeds the topology from etcd for as long as ctx lives
// (the store's watch re-establishes itself after etcd trouble; meanwhile
// the node routes by its cached placement). When no placement exists and
// autoInit is set, it creates a one-instance placement for this node.
func (n *Node) watchPlacement(ctx context.Context, store *placement.Store, feed *placementFeed) {
	if n.cfg.Cluster.AutoInit {
		go n.autoInit(ctx, store)
	}
	for p := range store.Watch(ctx) {
		feed.offer(p, "watch")
	}
}

func (n *Node) autoInit(ctx context.Context, store *placement.Store) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		_, err := store.Get(ctx)
		if err == nil {
			return
		}
		if errors.Is(err, placement.ErrNotFound) {
			self := n.selfInstance()
			_, err = store.Init(ctx, []placement.Instance{self}, uint32(n.cfg.Cluster.NumShards), 1)
			if err == nil {
				n.log.Info("created a one-node placement", "instance", self.ID, "shards", n.cfg.Cluster.NumShards)
				return
			}
			if errors.Is(err, placement.ErrExists) {
				return
			}
		}
		n.log.Warn("placement not readable yet", "err", err)
		if ctxsleep.Sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (n *Node) selfInstance() placement.Instance {
	host, port, _ := net.SplitHostPort(n.cfg.RPC.Advertise)
	var p uint32
	fmt.Sscanf(port, "%d", &p)
	return placement.Instance{
		ID: n.cfg.ID, IsolationGroup: n.cfg.IsolationGroup, Zone: "local", Weight: 1,
		Endpoint: n.cfg.RPC.Advertise, HTTPEndpoint: n.HTTPAddr(), Hostname: host, Port: p,
	}
}

// reconcile reacts to every placement: bootstrap newly given shards, mark
// them available, release shards no longer held (after a grace period),
// and keep /ready current.
func (n *Node) reconcile(ctx context.Context, b *bootstrap.Bootstrapper) {
	sub := n.topo.Subscribe()
	var m *client.Map
	released := map[uint32]time.Time{} // shard -> when first seen not owned
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m = <-sub:
		case <-retry.C:
		}
		if m == nil {
			continue
		}
		n.updateReady(m, b)
		if err := b.Reconcile(ctx, m); err != nil && ctx.Err() == nil {
			n.log.Warn("bootstrap round failed; retrying", "err", err)
		}
		n.updateReady(n.topo.Get(), b)
		n.releaseShards(m, released)
		// Come back while shards are pending (failed fetch, CAS lost, or
		// waiting for the watch to show our CAS) or releases are due.
		if bootstrap.PendingShards(m, n.cfg.ID) > 0 || len(released) > 0 {
			retry.Reset(time.Second)
		}
	}
}

func (n *Node) updateReady(m *client.Map, b *bootstrap.Bootstrapper) {
	if m == nil {
		n.state.setReason("no placement yet: waiting for etcd")
		return
	}
	pending := bootstrap.PendingShards(m, n.cfg.ID)
	if pending == 0 {
		n.state.setReason("")
		return
	}
	// Read on every /ready request: the round's counters move per block
	// and page streamed, so the answer is current while the round runs.
	n.state.setReadyFunc(func() (string, any) {
		p := b.Progress()
		return bootstrapReason(pending, p), p
	})
}

// bootstrapReason is /ready's reason while shards bootstrap, in units an
// operator reads at a glance.
func bootstrapReason(pending int, p bootstrap.Progress) string {
	head := fmt.Sprintf("bootstrapping: %d shards INITIALIZING", pending)
	if !p.Running {
		return head + ", waiting for the next round"
	}
	left := "time left unknown until a shard is streamed"
	if p.ETA >= 0 {
		left = "about " + p.ETA.Round(time.Second).String() + " left"
	}
	return fmt.Sprintf("%s: %d/%d shards streamed this round, %s samples and %s in %s (%s/s), %s",
		head, p.RoundStreamed, p.RoundShards, humanCount(float64(p.Samples)), humanBytes(float64(p.Bytes)),
		p.Elapsed.Round(time.Second), humanBytes(p.BytesPerSecond), left)
}

// humanCount writes n with a k, M or G suffix (1000s).
func humanCount(n float64) string {
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e9, " G"}, {1e6, " M"}, {1e3, " k"}} {
		if n >= u.div {
			return fmt.Sprintf("%.1f%s", n/u.div, u.unit)
		}
	}
	return fmt.Sprintf("%.0f", n)
}

// humanBytes writes n in B, KiB, MiB, GiB or TiB.
func humanBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// shardReleaseGrace is how long a shard's data is kept after the
// placement stopped giving it to this node, so reads routed by a slightly
// older placement elsewhere still find it.
const shardReleaseGrace = 30 * time.Second

func (n *Node) releaseShards(m *client.Map, seen map[uint32]time.Time) {
	owned := map[uint32]bool{}
	if in, ok := m.Placement.Instance(n.cfg.ID); ok {
		for _, s := range in.Shards {
			owned[s.ID] = true
		}
	}
	now := time.Now()
	for _, sh := range n.db.ShardsWithData() {
		if owned[sh] {
			delete(seen, sh)
			continue
		}
		first, ok := seen[sh]
		if !ok {
			seen[sh] = now
			continue
		}
		if now.Sub(first) >= shardReleaseGrace {
			if err := n.db.DropShard(sh); err != nil {
				n.log.Warn("release shard", "shard", sh, "err", err)
				continue
			}
			delete(seen, sh)
		}
	}
	for sh := range seen {
		if owned[sh] {
			delete(seen, sh)
		}
	}
}
