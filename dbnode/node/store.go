package node

import (
	"context"
	"fmt"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/placement"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func (n *Node) openPlacementStore() (*placement.Store, func(), error) {
	ec := clientv3.Config{
		Endpoints:   n.cfg.Etcd.Endpoints,
		DialTimeout: n.cfg.Etcd.DialTimeout,
		Logger:      etcdClientLogger(n.log),
	}
	if err := etcdClientConfig(n.cfg.Etcd, &ec); err != nil {
		return nil, nil, err
	}
	cli, err := clientv3.New(ec)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %v: %w", n.cfg.Etcd.Endpoints, err)
	}
	return placement.NewStore(cli, placement.StoreOptions{Cluster: n.cfg.Cluster.Name}), func() { cli.Close() }, nil
}

// markAvailable adapts the store to the bootstrap's one-CAS contract
// (Store.Update retries a lost CAS itself; the bootstrapper retries on
// top of that, reading Placement to drop shards that moved). The CAS
// starts from the placement the node holds (its watch keeps it current),
// so it needs no read of the key first, and its result is offered to the
// node's topology (placementFeed): the shards count as AVAILABLE here
// (/ready, the next round) without waiting for the watch to deliver the
// write.
type markAvailable struct {
	s    *placement.Store
	topo *client.Topology
	feed *placementFeed
}

func (m markAvailable) MarkAvailable(ctx context.Context, id string, shards []uint32) error {
	var guess placement.Placement
	if cur := m.topo.Get(); cur != nil {
		guess = cur.Placement
	}
	p, err := m.s.MarkAvailableFrom(ctx, guess, id, shards...)
	if err != nil {
		return err
	}
	m.feed.offer(p, "mark-available")
	return nil
}

func (m markAvailable) Placement(ctx context.Context) (placement.Placement, error) {
	return m.s.Get(ctx)
}
