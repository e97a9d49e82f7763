package client

import (
	"crypto/tls"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
)

// WriteResult reports a write a node carried out: Written samples applied,
// Rejected ones refused for good (RejectMsg says why, for one of them).
type WriteResult = rpc.WriteResult

// DialRPC returns a DialFunc over the node RPC, each call bounded by
// timeout unless its context carries a deadline.
func DialRPC(timeout time.Duration) DialFunc { return DialRPCTLS(timeout, nil) }

// DialRPCTLS is DialRPC over TLS (mutual TLS between nodes) when tc is
// not nil.
func DialRPCTLS(timeout time.Duration, tc *tls.Config) DialFunc {
	return func(endpoint string) (Peer, error) {
		c, err := rpc.Dial(endpoint, rpc.ClientOptions{Timeout: timeout, TLS: tc})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
