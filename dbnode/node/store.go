package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tessera-tsdb/tessera/placement"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdStore is the node's view of the placement key in etcd: read, apply a
// pure placement operation, validate, compare-and-swap on ModRevision.
type etcdStore struct {
	cli *clientv3.Client
	key string
}

func placementKey(cluster string) string { return "_tessera/placement/" + cluster }

func (n *Node) openPlacementStore() (PlacementStore, func(), error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   n.cfg.Etcd.Endpoints,
		DialTimeout: n.cfg.Etcd.DialTimeout,
		Logger:      zapNop(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %v: %w", n.cfg.Etcd.Endpoints, err)
	}
	return &etcdStore{cli: cli, key: placementKey(n.cfg.Cluster.Name)}, func() { cli.Close() }, nil
}

func (s *etcdStore) get(ctx context.Context) (placement.Placement, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key)
	if err != nil {
		return placement.Placement{}, 0, fmt.Errorf("read placement: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return placement.Placement{}, 0, placement.ErrNotFound
	}
	var p placement.Placement
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		return placement.Placement{}, 0, fmt.Errorf("decode placement: %w", err)
	}
	p.Version = resp.Kvs[0].ModRevision
	return p, p.Version, nil
}

func (s *etcdStore) Get(ctx context.Context) (placement.Placement, error) {
	p, _, err := s.get(ctx)
	return p, err
}

func (s *etcdStore) cas(ctx context.Context, rev int64, p placement.Placement) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmp := clientv3.Compare(clientv3.ModRevision(s.key), "=", rev)
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(s.key), "=", 0)
	}
	resp, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(s.key, string(b))).Commit()
	if err != nil {
		return false, fmt.Errorf("write placement: %w", err)
	}
	return resp.Succeeded, nil
}

func (s *etcdStore) Init(ctx context.Context, instances []placement.Instance, numShards uint32, rf int) (placement.Placement, error) {
	p, err := placement.Init(instances, numShards, rf)
	if err != nil {
		return placement.Placement{}, err
	}
	ok, err := s.cas(ctx, 0, p)
	if err != nil {
		return placement.Placement{}, err
	}
	if !ok {
		return placement.Placement{}, placement.ErrExists
	}
	return s.Get(ctx)
}

func (s *etcdStore) MarkAvailable(ctx context.Context, id string, shards []uint32) error {
	for attempt := 0; attempt < 10; attempt++ {
		p, rev, err := s.get(ctx)
		if err != nil {
			return err
		}
		next, err := placement.MarkAvailable(p, id, shards...)
		if err != nil {
			return err
		}
		ok, err := s.cas(ctx, rev, next)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("mark available: %w after 10 attempts", placement.ErrCASConflict)
}

func (s *etcdStore) Watch(ctx context.Context, fromRev int64) <-chan placement.Placement {
	out := make(chan placement.Placement)
	go func() {
		defer close(out)
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer cancel()
		for resp := range s.cli.Watch(wctx, s.key, clientv3.WithRev(fromRev)) {
			if resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events {
				if ev.Kv == nil || len(ev.Kv.Value) == 0 {
					continue
				}
				var p placement.Placement
				if json.Unmarshal(ev.Kv.Value, &p) != nil {
					continue
				}
				p.Version = ev.Kv.ModRevision
				select {
				case out <- p:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}
