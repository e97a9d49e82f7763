package node

import (
	"context"
	"fmt"

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
// (Store.Update re-reads and retries a lost CAS itself; the bootstrapper
// retries on top of that, reading Placement to drop shards that moved).
type markAvailable struct{ s *placement.Store }

func (m markAvailable) MarkAvailable(ctx context.Context, id string, shards []uint32) error {
	_, err := m.s.MarkAvailable(ctx, id, shards...)
	return err
}

func (m markAvailable) Placement(ctx context.Context) (placement.Placement, error) {
	return m.s.Get(ctx)
}
