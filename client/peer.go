package client

import (
	"context"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Peer is what the session calls on one remote node. *rpc.Client is the
// production implementation; unit tests use in-memory fakes (hung, failing,
// slow, refusing shards) so the fan-out and health logic run without a
// network.
type Peer interface {
	// WriteBatch writes samples (each carrying its series ID and shard)
	// into namespace ns. A nil error means every sample was applied except
	// the Rejected ones, refused for good by the namespace's time rules.
	WriteBatch(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error)
	// FetchTagged returns the series matching the request.
	FetchTagged(ctx context.Context, req *rpc.FetchTaggedRequest) (*rpc.FetchResponse, error)
	// Health answers while the node's process is alive and serving RPCs.
	Health(ctx context.Context) (*rpc.HealthResponse, error)
	Close() error
}

// DialFunc returns a Peer for a node's RPC endpoint (host:port). It must
// not wait for the connection: a node that is down fails calls, not Dial.
type DialFunc func(endpoint string) (Peer, error)
