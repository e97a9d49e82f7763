package placement

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch delivers the cluster's placement on the returned channel: first the
// current one (as soon as it exists), then every new version, until ctx is
// done; then the channel is closed.
//
// Delivery keeps the newest: a receiver slower than the writers may skip
// intermediate versions but always gets the latest, and Versions only go
// up. Values that do not decode or do not Validate are skipped, as is
// deleting the key. When the watch breaks (etcd restarted, history
// compacted, leader lost) it re-reads the key and watches again, backing
// off while etcd is unreachable; the receiver sees no gap other than
// skipped intermediate versions.
func (s *Store) Watch(ctx context.Context) <-chan Placement {
	out := make(chan Placement)
	go s.watch(ctx, out, 0)
	return out
}

// watch runs the loop behind Watch. With startRev > 0 the first watch starts
// at that revision without reading first (tests use it to land on a
// compacted revision).
func (s *Store) watch(ctx context.Context, out chan<- Placement, startRev int64) {
	defer close(out)
	var (
		pending *Placement
		last    int64
		failing int
	)
	offer := func(p Placement) {
		if p.Version > last && p.Validate() == nil {
			last, pending = p.Version, &p
		}
	}
	// wait sleeps for d, still handing the pending placement over.
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			var send chan<- Placement
			var next Placement
			if pending != nil {
				send, next = out, *pending
			}
			select {
			case <-ctx.Done():
				return false
			case <-t.C:
				return true
			case send <- next:
				pending = nil
			}
		}
	}

	for ctx.Err() == nil {
		from := startRev
		if startRev > 0 {
			startRev = 0
		} else {
			p, rev, err := s.read(ctx)
			if rev == 0 { // etcd unreachable: try again later
				failing++
				if !wait(backoffWatch(failing)) {
					return
				}
				continue
			}
			failing = 0
			if err == nil {
				offer(p)
			}
			from = rev + 1
		}
		if !s.follow(ctx, out, from, &pending, offer) {
			return
		}
		if !wait(backoffWatch(failing + 1)) {
			return
		}
	}
}

// follow watches the key from revision `from` until the watch breaks
// (returns true) or ctx is done (returns false).
func (s *Store) follow(ctx context.Context, out chan<- Placement, from int64, pending **Placement, offer func(Placement)) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.client.Watch(wctx, s.key, clientv3.WithRev(from))
	for {
		var send chan<- Placement
		var next Placement
		if *pending != nil {
			send, next = out, **pending
		}
		select {
		case <-ctx.Done():
			return false
		case send <- next:
			*pending = nil
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil || resp.Canceled {
				return true
			}
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				if p, err := decodeStored(ev.Kv.Value, ev.Kv.ModRevision); err == nil {
					offer(p)
				}
			}
		}
	}
}

// backoffWatch waits longer the more consecutive failures, up to 2 s.
func backoffWatch(failures int) time.Duration {
	return min(time.Duration(failures)*100*time.Millisecond, 2*time.Second)
}
