package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// ClientOptions configure a Client.
type ClientOptions struct {
	// Timeout bounds each call whose context carries no deadline
	// (DefaultTimeout when 0). A deadline on the context always wins.
	Timeout time.Duration
	// MaxMsgSize bounds requests and responses (DefaultMaxMsgSize when 0);
	// keep it equal to the servers'.
	MaxMsgSize int
	// DialOptions are appended to the client's own (tests).
	DialOptions []grpc.DialOption
	// TLS, when set, secures the connection (mutual TLS between nodes:
	// it verifies the peer against the cluster CA and presents this
	// node's certificate). Nil: plaintext.
	TLS *tls.Config
}

// Client calls one node. It is safe for concurrent use: all calls share one
// gRPC connection, which reconnects by itself after failures.
type Client struct {
	addr    string
	conn    *grpc.ClientConn
	timeout time.Duration
	// olderUntil: until this time (unix nanoseconds) the node is taken
	// for one of the previous version, which does not read BATCH_V1
	// (Write); after it, BATCH_V1 is tried again, as the node may have
	// been upgraded behind the same address.
	olderUntil atomic.Int64
}

// Dial returns a client of the node at addr (host:port). It does not wait
// for the connection: the first call connects, and a node that is down
// fails calls with Unavailable until it is back.
func Dial(addr string, opts ClientOptions) (*Client, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("rpc: dial %q: want host:port: %w", addr, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxMsgSize <= 0 {
		opts.MaxMsgSize = DefaultMaxMsgSize
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect within a second of a peer coming back: gRPC's default
		// backoff (up to 2 minutes) would keep a restarted replica from
		// receiving writes long after it is up again.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(opts.MaxMsgSize),
			grpc.MaxCallSendMsgSize(opts.MaxMsgSize),
		),
	}, opts.DialOptions...)
	// passthrough: the Go dialer resolves addr at every (re)connect, so a
	// node that comes back under a new IP (containers) is found again.
	conn, err := grpc.NewClient("passthrough:///"+addr, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("rpc: dial %s: %w", addr, err)
	}
	return &Client{addr: addr, conn: conn, timeout: opts.Timeout}, nil
}

// Addr is the node address the client calls.
func (c *Client) Addr() string { return c.addr }

// WriteBatch writes samples into namespace ns. Samples may come in any
// order; consecutive samples of one series (the same ID bytes) travel as
// one entry, so callers that group them send less. Each sample's Shard must
// be ident.Shard of its ID. A nil error means the node applied every sample
// except the Rejected ones, which it refused for good.
func (c *Client) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	return c.writeBatch(ctx, ns, samples, false)
}

// WriteBatchFill is WriteBatch with fill_only set: the node keeps the
// values it already holds at the samples' series and timestamps (a node
// older than the field overwrites them). Hint replays use it.
func (c *Client) WriteBatchFill(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	return c.writeBatch(ctx, ns, samples, true)
}

func (c *Client) writeBatch(ctx context.Context, ns string, samples []storage.Sample, fill bool) (WriteResult, error) {
	req, err := encodeWriteRequest(ns, samples, fill, requestPool)
	if err != nil {
		return WriteResult{}, err
	}
	defer req.free()
	resp := new(nodepb.WriteBatchResponse)
	if err := c.invoke(ctx, nodepb.Node_WriteBatch_FullMethodName, req, resp, grpc.ForceCodecV2(writeCodec{})); err != nil {
		return WriteResult{}, err
	}
	return writeResultFromPB(resp), nil
}

// Write writes a batch of every kind in one request (payload format
// BATCH_V1); a batch of floats alone goes as WriteBatch sends it. A node
// of the previous version refuses BATCH_V1 as a format it does not know
// (InvalidArgument, "unknown to this node") and writes nothing: Write
// then sends it the batch in the formats it reads, floats (SERIES_V1)
// then histograms (HISTOGRAMS_V1), and keeps doing so for that node for
// olderRecheck. A node older still refuses HISTOGRAMS_V1 with
// InvalidArgument too, which Write returns.
func (c *Client) Write(ctx context.Context, ns string, b storage.Batch) (WriteResult, error) {
	return c.write(ctx, ns, b, false)
}

// WriteFill is Write with fill_only set (WriteBatchFill).
func (c *Client) WriteFill(ctx context.Context, ns string, b storage.Batch) (WriteResult, error) {
	return c.write(ctx, ns, b, true)
}

// WriteHistograms is Write of native histograms alone.
func (c *Client) WriteHistograms(ctx context.Context, ns string, samples []storage.HistogramSample) (WriteResult, error) {
	return c.Write(ctx, ns, storage.Batch{Histograms: samples})
}

// olderRecheck is how long a node that refused BATCH_V1 is sent the
// previous version's formats before BATCH_V1 is tried on it again.
const olderRecheck = time.Minute

func (c *Client) write(ctx context.Context, ns string, b storage.Batch, fill bool) (WriteResult, error) {
	if len(b.Histograms) == 0 {
		return c.writeBatch(ctx, ns, b.Floats, fill)
	}
	if time.Now().UnixNano() < c.olderUntil.Load() {
		return c.writeOlder(ctx, ns, b, fill)
	}
	res, err := c.writePayload(ctx, ns, nodepb.PayloadFormat_PAYLOAD_FORMAT_BATCH_V1, b, fill)
	if Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "unknown to this node") {
		c.olderUntil.Store(time.Now().Add(olderRecheck).UnixNano())
		return c.writeOlder(ctx, ns, b, fill)
	}
	return res, err
}

// writeOlder writes b in the formats a node of the previous version
// reads: its floats as SERIES_V1, then its histograms as HISTOGRAMS_V1,
// the two results summed.
func (c *Client) writeOlder(ctx context.Context, ns string, b storage.Batch, fill bool) (WriteResult, error) {
	var res WriteResult
	if len(b.Floats) > 0 {
		r, err := c.writeBatch(ctx, ns, b.Floats, fill)
		if err != nil {
			return WriteResult{}, err
		}
		res = r
	}
	r, err := c.writePayload(ctx, ns, nodepb.PayloadFormat_PAYLOAD_FORMAT_HISTOGRAMS_V1, storage.Batch{Histograms: b.Histograms}, fill)
	if err != nil {
		return WriteResult{}, err
	}
	return res.add(r), nil
}

// writePayload sends b as one WriteBatch request of format f (BATCH_V1,
// or HISTOGRAMS_V1 for histograms alone).
func (c *Client) writePayload(ctx context.Context, ns string, f nodepb.PayloadFormat, b storage.Batch, fill bool) (WriteResult, error) {
	var payload []byte
	var err error
	if f == nodepb.PayloadFormat_PAYLOAD_FORMAT_HISTOGRAMS_V1 {
		payload, err = appendHistogramPayload(nil, b.Histograms)
	} else {
		payload, err = appendBatchPayload(nil, b)
	}
	if err != nil {
		return WriteResult{}, status.Error(codes.InvalidArgument, err.Error())
	}
	req := &nodepb.WriteBatchRequest{Namespace: ns, Format: f, Payload: payload, FillOnly: fill}
	resp := new(nodepb.WriteBatchResponse)
	if err := c.invoke(ctx, nodepb.Node_WriteBatch_FullMethodName, req, resp); err != nil {
		return WriteResult{}, err
	}
	return writeResultFromPB(resp), nil
}

// FetchTagged returns the series matching req. Streams and IDs of the
// response are the caller's.
func (c *Client) FetchTagged(ctx context.Context, req *FetchTaggedRequest) (*FetchResponse, error) {
	resp := new(nodepb.FetchResponse)
	if err := c.invoke(ctx, nodepb.Node_FetchTagged_FullMethodName, req.toPB(), resp); err != nil {
		return nil, err
	}
	return fetchResponseFromPB(resp), nil
}

// Fetch returns one series per ID of req, in order.
func (c *Client) Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	resp := new(nodepb.FetchResponse)
	if err := c.invoke(ctx, nodepb.Node_Fetch_FullMethodName, req.toPB(), resp); err != nil {
		return nil, err
	}
	return fetchResponseFromPB(resp), nil
}

// Health asks the node whether it is ready.
func (c *Client) Health(ctx context.Context) (*HealthResponse, error) {
	resp := new(nodepb.HealthResponse)
	if err := c.invoke(ctx, nodepb.Node_Health_FullMethodName, &nodepb.HealthRequest{}, resp); err != nil {
		return nil, err
	}
	return healthFromPB(resp), nil
}

// BlockMetadata lists the flushed blocks of the requested shards, one
// ShardBlocks per distinct shard in request order.
func (c *Client) BlockMetadata(ctx context.Context, req *BlockMetadataRequest) (*BlockMetadataResponse, error) {
	resp := new(nodepb.BlockMetadataResponse)
	if err := c.invoke(ctx, nodepb.Node_BlockMetadata_FullMethodName, req.toPB(), resp); err != nil {
		return nil, err
	}
	return blockMetadataResponseFromPB(resp), nil
}

// FetchBlock returns one page of a flushed block's series as stored; while
// resp.More, ask again with After set to the last series' ID.
func (c *Client) FetchBlock(ctx context.Context, req *FetchBlockRequest) (*FetchBlockResponse, error) {
	resp := new(nodepb.FetchBlockResponse)
	if err := c.invoke(ctx, nodepb.Node_FetchBlock_FullMethodName, req.toPB(), resp); err != nil {
		return nil, err
	}
	return fetchBlockResponseFromPB(resp), nil
}

// FetchUnflushed returns one page of a shard's unflushed series, paged
// like FetchBlock.
func (c *Client) FetchUnflushed(ctx context.Context, req *FetchUnflushedRequest) (*FetchUnflushedResponse, error) {
	resp := new(nodepb.FetchUnflushedResponse)
	if err := c.invoke(ctx, nodepb.Node_FetchUnflushed_FullMethodName, req.toPB(), resp); err != nil {
		return nil, err
	}
	return fetchUnflushedResponseFromPB(resp), nil
}

// BlockDigests returns the digest of every block of a shard with samples
// in [req.Start, req.End).
func (c *Client) BlockDigests(ctx context.Context, req *BlockDigestsRequest) (*BlockDigestsResponse, error) {
	resp := new(nodepb.BlockDigestsResponse)
	if err := c.invoke(ctx, nodepb.Node_BlockDigests_FullMethodName, req.toPB(), resp); err != nil {
		return nil, err
	}
	return blockDigestsResponseFromPB(resp), nil
}

// SeriesChecksums returns one page of a block's per-series checksums;
// while resp.More, ask again with After set to the last series' ID.
func (c *Client) SeriesChecksums(ctx context.Context, req *SeriesChecksumsRequest) (*SeriesChecksumsResponse, error) {
	resp := new(nodepb.SeriesChecksumsResponse)
	if err := c.invoke(ctx, nodepb.Node_SeriesChecksums_FullMethodName, req.toPB(), resp); err != nil {
		return nil, err
	}
	return seriesChecksumsResponseFromPB(resp), nil
}

// Close closes the connection; calls in flight fail with Canceled.
func (c *Client) Close() error { return c.conn.Close() }

// invoke makes one call and returns nil or an *Error.
func (c *Client) invoke(ctx context.Context, method string, req any, resp proto.Message, opts ...grpc.CallOption) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var trailer metadata.MD
	err := c.conn.Invoke(ctx, method, req, resp, append(opts, grpc.Trailer(&trailer))...)
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(Code(err), err.Error())
	}
	e := &Error{Addr: c.addr, Method: method[strings.LastIndexByte(method, '/')+1:], Status: st}
	if v := trailer.Get(RefusedShardsKey); len(v) > 0 {
		e.Shards = parseRefusedShards(v[0])
	}
	return e
}
