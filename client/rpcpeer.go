package client

// TEMPORARY: this file is removed when rpc.Client.WriteBatch takes samples
// (the protobuf RPC change, issue 13 item 1). Then *rpc.Client satisfies
// Peer directly, WriteResult becomes `type WriteResult = rpc.WriteResult`,
// and DialRPC returns rpc.Dial's client.

import (
	"bytes"
	"context"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// WriteResult reports a write a node carried out: Written samples applied,
// Rejected ones refused for good (RejectMsg says why, for one of them).
// TEMPORARY: becomes an alias of rpc.WriteResult after the RPC change.
type WriteResult struct {
	Written, Rejected int
	RejectMsg         string
}

// DialRPC returns a DialFunc over the node RPC, each call bounded by
// timeout unless its context carries a deadline.
func DialRPC(timeout time.Duration) DialFunc {
	return func(endpoint string) (Peer, error) {
		c, err := rpc.Dial(endpoint, rpc.ClientOptions{Timeout: timeout})
		if err != nil {
			return nil, err
		}
		return rpcPeer{c}, nil
	}
}

// rpcPeer adapts today's *rpc.Client, whose WriteBatch takes a
// *rpc.WriteRequest, to Peer. TEMPORARY, see the file comment.
type rpcPeer struct{ *rpc.Client }

func (p rpcPeer) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	req := &rpc.WriteRequest{Namespace: ns}
	// Samples of one series arrive consecutively (the session keeps the
	// request's order), so comparing with the previous ID groups them
	// without a map; a series that recurs later gets a second entry, which
	// the server applies alike.
	var last []byte
	for i := range samples {
		s := &samples[i]
		if len(req.Series) == 0 || !bytes.Equal(s.ID, last) {
			req.Series = append(req.Series, rpc.WriteSeries{ID: s.ID, Shard: s.Shard})
			last = s.ID
		}
		ws := &req.Series[len(req.Series)-1]
		ws.Samples = append(ws.Samples, rpc.Sample{T: s.T, V: s.V})
	}
	resp, err := p.Client.WriteBatch(ctx, req)
	if err != nil {
		return WriteResult{}, err
	}
	return WriteResult{Written: resp.Written, Rejected: resp.Rejected, RejectMsg: resp.RejectMsg}, nil
}
