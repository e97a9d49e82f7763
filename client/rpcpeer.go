package client

import (
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
)

// WriteResult reports a write a node carried out: Written samples applied,
// Rejected ones refused for good (RejectMsg says why, for one of them).
type WriteResult = rpc.WriteResult

// DialRPC returns a DialFunc over the node RPC, each call bounded by
// timeout unless its context carries a deadline.
func DialRPC(timeout time.Duration) DialFunc {
	return func(endpoint string) (Peer, error) {
		c, err := rpc.Dial(endpoint, rpc.ClientOptions{Timeout: timeout})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
