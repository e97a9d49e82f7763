package rpc

import (
	"context"
	"crypto/tls"
	"log/slog"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	metricmeta "github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/limits"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// DefaultMaxMsgSize bounds messages in both directions unless configured:
// large enough for big fetches, small enough to refuse a runaway one.
const DefaultMaxMsgSize = 256 << 20

// Database is the part of the storage engine the server calls;
// *storage.Database satisfies it.
type Database interface {
	WriteBatch(ns string, batch []storage.Sample) error
	// Write writes a batch of every kind through storage's one entry
	// point (storage.Database.Write).
	Write(ns string, b storage.Batch) error
	// ResolveRefs sets the Ref of the samples whose series the node holds
	// under exactly their ID in their shard (storage.Database.ResolveRefs).
	ResolveRefs(ns string, batch []storage.Sample)
	Read(ns string, id []byte, start, end int64) (encoding.Iterator, error)
	// ReadHistograms is Read for the series' native histograms.
	ReadHistograms(ns string, id []byte, start, end int64) (encoding.HistogramIterator, error)
	Query(ctx context.Context, ns string, matchers []*labels.Matcher, start, end int64, qo storage.QueryOptions) ([]storage.SeriesIterator, error)
	Shard(id []byte) uint32
	NumShards() uint32
	Namespaces() []storage.NamespaceOptions

	// Peer bootstrap: flushed blocks as stored, and unflushed data, paged.
	FlushedBlocks(ns string, shard uint32) ([]storage.BlockMeta, error)
	ReadBlock(ns string, shard uint32, blockStart int64, after []byte, maxBytes int) ([]fileset.Series, bool, error)
	ReadUnflushed(ns string, shard uint32, after []byte, maxBytes int) ([]storage.SeriesStream, bool, error)

	// Anti-entropy repair: digests and checksums of what a read returns.
	BlockDigests(ns string, shard uint32, start, end int64) ([]storage.BlockDigest, error)
	SeriesChecksums(ns string, shard uint32, blockStart, start, end int64) ([]storage.SeriesChecksum, error)
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// NodeID is this node's placement instance ID, reported by Health.
	NodeID string
	// Ready reports whether the node serves (all its shards bootstrapped)
	// and, if not, why. Nil means always ready.
	Ready func() (bool, string)
	// MaxMsgSize bounds requests and responses (DefaultMaxMsgSize when 0).
	// A fetch whose answer would be larger fails with ResourceExhausted.
	MaxMsgSize int
	// Logger gets transient storage failures; discarded when nil.
	Logger *slog.Logger
	// MaxStreamBytesPerSecond bounds the bytes per second that FetchBlock
	// and FetchUnflushed replies send, shared by all calls of the server
	// (0 = unlimited), so peer bootstrap cannot starve reads and writes.
	MaxStreamBytesPerSecond int64
	// Limits: every series written is validated as HTTP remote write
	// validates new series (limits.CheckID: Prometheus' label rules and
	// the label limits). nil: the rules only.
	Limits *limits.Limits
	// TLS, when set, serves over TLS; with ClientAuth
	// RequireAndVerifyClientCert (tlsfiles.ServerMutual) a peer without a
	// certificate from the cluster CA fails the handshake. Nil: plaintext.
	TLS *tls.Config
	// Exemplars and Metadata are the node's stores of auxiliary data,
	// written and queried by the Exemplars* and Metadata* methods (aux.go).
	// Nil: those methods answer Unimplemented, as a node older than them.
	Exemplars *exemplars.Store
	Metadata  *metricmeta.Store
	// Pushdown computes pushed-down queries (pushdown.go). Nil: Pushdown
	// answers Unimplemented, as a node older than it.
	Pushdown Evaluator
	// PushdownParts computes a pushed-down request of several parts
	// (PushdownRequest.parts) with one read of their series. Nil: such a
	// request is answered for its first part only, as a node older than
	// parts answers it (the requester asks for the others apart).
	PushdownParts PartsEvaluator
}

// Server serves node RPC over a database. It holds no per-request state
// and is safe for concurrent use.
type Server struct {
	db         Database
	own        Ownership
	opts       ServerOptions
	namespaces map[string]storage.NamespaceOptions
	scratch    sync.Pool // *writeScratch, reused across write batches
	refs       *refCache // series refs of recent writes
	pacer      *pacer    // paces peer streaming replies
}

// NewServer returns a server over db that serves the shards own allows
// (every shard when own is nil).
func NewServer(db Database, own Ownership, opts ServerOptions) *Server {
	if own == nil {
		own = AllShards{}
	}
	if opts.MaxMsgSize <= 0 {
		opts.MaxMsgSize = DefaultMaxMsgSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{db: db, own: own, opts: opts, namespaces: map[string]storage.NamespaceOptions{}, refs: newRefCache(refCacheSlots),
		pacer: newPacer(opts.MaxStreamBytesPerSecond)}
	for _, ns := range db.Namespaces() {
		s.namespaces[ns.Name] = ns
	}
	return s
}

// ServiceName is the gRPC service of node RPC (nodepb/node.proto).
const ServiceName = "tessera.rpc.v1.Node"

// Register adds the node service to g. Build g with GRPCServerOptions so
// its message size limits match the server's.
func (s *Server) Register(g *grpc.Server) { nodepb.RegisterNodeServer(g, service{s: s}) }

// GRPCServerOptions are the grpc.NewServer options node RPC needs: message
// size limits of MaxMsgSize in both directions (gRPC's default is 4 MiB),
// and the TLS credentials when ServerOptions.TLS is set.
func (s *Server) GRPCServerOptions() []grpc.ServerOption {
	o := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.opts.MaxMsgSize),
		grpc.MaxSendMsgSize(s.opts.MaxMsgSize),
	}
	if s.opts.TLS != nil {
		o = append(o, grpc.Creds(credentials.NewTLS(s.opts.TLS)))
	}
	return o
}

// service is the Server as the generated service descriptor sees it: it
// converts the wire messages to the package's structs and back, and keeps
// the handler methods off Server, whose public API is construction.
// Embedding UnimplementedNodeServer answers methods a newer .proto adds
// with Unimplemented until they are written.
type service struct {
	nodepb.UnimplementedNodeServer
	s *Server
}

func (v service) WriteBatch(ctx context.Context, req *nodepb.WriteBatchRequest) (*nodepb.WriteBatchResponse, error) {
	res, err := v.s.writeBatch(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.toPB(), nil
}

func (v service) WriteStream(st nodepb.Node_WriteStreamServer) error { return v.s.writeStream(st) }

func (v service) FetchTagged(ctx context.Context, req *nodepb.FetchTaggedRequest) (*nodepb.FetchResponse, error) {
	resp, err := v.s.fetchTagged(ctx, fetchTaggedFromPB(req))
	if err != nil {
		return nil, err
	}
	return resp.toPB(), nil
}

func (v service) Fetch(ctx context.Context, req *nodepb.FetchRequest) (*nodepb.FetchResponse, error) {
	resp, err := v.s.fetch(ctx, fetchFromPB(req))
	if err != nil {
		return nil, err
	}
	return resp.toPB(), nil
}

func (v service) BlockMetadata(ctx context.Context, req *nodepb.BlockMetadataRequest) (*nodepb.BlockMetadataResponse, error) {
	resp, err := v.s.blockMetadata(ctx, blockMetadataRequestFromPB(req))
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (v service) FetchBlock(ctx context.Context, req *nodepb.FetchBlockRequest) (*nodepb.FetchBlockResponse, error) {
	resp, err := v.s.fetchBlock(ctx, fetchBlockRequestFromPB(req))
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (v service) FetchUnflushed(ctx context.Context, req *nodepb.FetchUnflushedRequest) (*nodepb.FetchUnflushedResponse, error) {
	resp, err := v.s.fetchUnflushed(ctx, fetchUnflushedRequestFromPB(req))
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (v service) BlockDigests(ctx context.Context, req *nodepb.BlockDigestsRequest) (*nodepb.BlockDigestsResponse, error) {
	return v.s.blockDigests(ctx, blockDigestsRequestFromPB(req))
}

func (v service) SeriesChecksums(ctx context.Context, req *nodepb.SeriesChecksumsRequest) (*nodepb.SeriesChecksumsResponse, error) {
	return v.s.seriesChecksums(ctx, seriesChecksumsRequestFromPB(req))
}

func (v service) Health(context.Context, *nodepb.HealthRequest) (*nodepb.HealthResponse, error) {
	resp := &HealthResponse{NodeID: v.s.opts.NodeID, Ready: true}
	if v.s.opts.Ready != nil {
		resp.Ready, resp.Message = v.s.opts.Ready()
	}
	return resp.toPB(), nil
}

func (s *Server) namespace(name string) (storage.NamespaceOptions, error) {
	ns, ok := s.namespaces[name]
	if !ok {
		return ns, status.Errorf(codes.InvalidArgument, "unknown namespace %q", name)
	}
	return ns, nil
}

// shardCheck asks Ownership once per distinct shard of a request and
// collects the refusals in the order first seen. Shards below numShards
// are remembered in two bitsets (a write batch touches thousands of
// shards: a map grew and rehashed for each batch); any other shard a
// request names (a fetch may name anything) in a map.
type shardCheck struct {
	own     Ownership
	op      Op
	asked   []uint64 // bit per shard: CheckShard was asked
	ok      []uint64 // bit per shard: and allowed it
	outside map[uint32]bool
	refused []refusal
}

func newShardCheck(own Ownership, op Op, numShards uint32) *shardCheck {
	words := (int(numShards) + 63) / 64
	bits := make([]uint64, 2*words)
	return &shardCheck{own: own, op: op, asked: bits[:words:words], ok: bits[words:]}
}

// seen says whether shard was checked before.
func (c *shardCheck) seen(shard uint32) bool {
	if w := int(shard / 64); w < len(c.asked) {
		return c.asked[w]&(1<<(shard%64)) != 0
	}
	_, done := c.outside[shard]
	return done
}

func (c *shardCheck) allowed(shard uint32) bool {
	w, bit := int(shard/64), uint64(1)<<(shard%64)
	inside := w < len(c.asked)
	if inside && c.asked[w]&bit != 0 {
		return c.ok[w]&bit != 0
	}
	if !inside {
		if ok, done := c.outside[shard]; done {
			return ok
		}
	}
	err := c.own.CheckShard(shard, c.op)
	switch {
	case inside:
		c.asked[w] |= bit
		if err == nil {
			c.ok[w] |= bit
		}
	default:
		if c.outside == nil {
			c.outside = map[uint32]bool{}
		}
		c.outside[shard] = err == nil
	}
	if err != nil {
		c.refused = append(c.refused, refusal{shard: shard, reason: err})
	}
	return err == nil
}

// err is the FailedPrecondition status naming the refused shards, also
// listed in full in the trailer; nil when none was refused.
func (c *shardCheck) err(ctx context.Context) error {
	if len(c.refused) == 0 {
		return nil
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(RefusedShardsKey, refusedShardsValue(c.refused)))
	return status.Error(codes.FailedPrecondition, refusedMessage(c.op, c.refused))
}

func (s *Server) logTransient(method string, err error) {
	if c := status.Code(err); c == codes.Unavailable || c == codes.DataLoss {
		s.opts.Logger.Warn("node rpc failed", "method", method, "err", err)
	}
}

// sizeLimit tracks the encoded size of a response as it grows, so a fetch
// fails as soon as it cannot be sent rather than after building it whole.
type sizeLimit struct {
	size, max int
}

func (l *sizeLimit) add(s *FetchedSeries) error {
	l.size += fetchedSeriesSize(s)
	if l.size > l.max-16 { // room for the header
		return status.Errorf(codes.ResourceExhausted,
			"fetch answer exceeds the %d-byte message limit: narrow the time range, matchers or shards", l.max)
	}
	return nil
}

// fetchedSeriesSize is the encoded size of s inside a FetchResponse: its
// fields, the series' own tag and length prefix.
func fetchedSeriesSize(s *FetchedSeries) int {
	n := 0
	if len(s.ID) > 0 {
		n += 1 + protowire.SizeBytes(len(s.ID))
	}
	if s.Shard != 0 {
		n += 1 + protowire.SizeVarint(uint64(s.Shard))
	}
	if len(s.Stream) > 0 {
		n += 1 + protowire.SizeBytes(len(s.Stream))
	}
	for _, h := range s.Histograms {
		n += 2 + protowire.SizeBytes(len(h)) // field 30: a two-byte tag
	}
	if len(s.Rollup) > 0 {
		n += 2 + protowire.SizeBytes(len(s.Rollup)) // field 31
	}
	return 1 + protowire.SizeBytes(n)
}
