package node

import (
	"crypto/tls"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/bootstrap"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/repair"
)

// dialCache keeps one RPC client per peer endpoint for the bootstrap. It
// hands them out as bootstrap.Peer and keeps the *rpc.Client to close.
type dialCache struct {
	timeout time.Duration
	tls     *tls.Config // node RPC mutual TLS; nil: plaintext
	mu      sync.Mutex
	clients map[string]*rpc.Client
}

func newDialCache(timeout time.Duration, tc *tls.Config) *dialCache {
	return &dialCache{timeout: timeout, tls: tc, clients: map[string]*rpc.Client{}}
}

func (d *dialCache) dial(endpoint string) (bootstrap.Peer, error) { return d.client(endpoint) }

// repairPeer hands the same clients out to the repair loop.
func (d *dialCache) repairPeer(endpoint string) (repair.Peer, error) { return d.client(endpoint) }

func (d *dialCache) client(endpoint string) (*rpc.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.clients[endpoint]; c != nil {
		return c, nil
	}
	// Bootstrap fetches move whole shards: allow them more time than a
	// write.
	c, err := rpc.Dial(endpoint, rpc.ClientOptions{Timeout: 10 * d.timeout, TLS: d.tls})
	if err != nil {
		return nil, err
	}
	d.clients[endpoint] = c
	return c, nil
}

func (d *dialCache) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ep, c := range d.clients {
		_ = c.Close()
		delete(d.clients, ep)
	}
}
