// Package node wires one Tessera node from its configuration: metrics,
// storage recovery, the HTTP API, and (in a cluster) etcd, the placement
// and node RPC. Everything is built with plain constructors from the config
// structs; Run owns the lifecycle.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/tessera-tsdb/tessera/bootstrap"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/crosssite"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/dbnode/webconfig"
	"github.com/tessera-tsdb/tessera/internal/gctune"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/tessera-tsdb/tessera/placement/placementhttp"
	"github.com/uber-go/tally/v4"
	promreporter "github.com/uber-go/tally/v4/prometheus"
	"google.golang.org/grpc"
)

// Node is one running tessera node.
type Node struct {
	cfg    config.Config
	log    *slog.Logger
	scope  tally.Scope
	closer io.Closer
	api    *httpapi.API
	state  *lifecycle // what api asks about the node's progress
	limits *limits.Limits
	sec    *security
	reg    *prom.Registry // this node's metrics, read by the console
	// insecure lists the surfaces open beyond loopback that
	// security.allowInsecure let through (/metrics and the console show
	// them).
	insecure []openSurface

	httpLn net.Listener
	rpcLn  net.Listener
	db     *storage.Database
	topo   *client.Topology
}

// New validates the config and binds the listeners, so a port in use fails
// fast and tests can ask for ":0" and read the address back.
func New(cfg config.Config, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	// A registry per node: several nodes can share a process (tests), and
	// /metrics carries the Go runtime and process collectors too.
	reg := prom.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter := totalCounters{promreporter.NewReporter(promreporter.Options{Registerer: reg})}
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		Prefix:         "tessera",
		CachedReporter: reporter,
		Separator:      promreporter.DefaultSeparator,
	}, time.Second)
	n := &Node{cfg: cfg, log: log, scope: scope, closer: closer, reg: reg, state: newLifecycle()}
	n.limits = limits.New(limits.Config(cfg.Limits), scope.SubScope("limits"))
	sec, err := newSecurity(cfg, log, scope.SubScope("http"))
	if err != nil {
		closer.Close()
		return nil, err
	}
	n.sec = sec
	if n.insecure, err = checkExposure(cfg, sec.httpClientCerts, log); err != nil {
		closer.Close()
		return nil, err
	}
	insecureGauge(reg, n.insecure)
	if n.api, err = httpapi.New(httpapi.Options{
		Namespace:          cfg.Namespaces[0].Name,
		MaxBodyBytes:       cfg.HTTP.MaxBodyBytes,
		SeriesCacheSize:    cfg.HTTP.SeriesCacheSize,
		MetadataMaxMetrics: cfg.Ingest.MetadataMaxMetrics,
		MaxExemplars:       cfg.Ingest.MaxExemplars,
		NumShards:          uint32(cfg.Cluster.NumShards),
		Logger:             log,
		Metrics:            scope.SubScope("http"),
		MetricsHandler:     reporter.HTTPHandler(),
		Limits:             n.limits,
		State:              n.state,
		Rollups:            remoteReadRollups(cfg.Namespaces),
		RawRetention:       cfg.Namespaces[0].Retention,
		RawBlockSize:       cfg.Namespaces[0].BlockSize,
		RollupReader:       rollupReader{n},
	}); err != nil {
		closer.Close()
		return nil, err
	}
	qa, err := promapi.New(httpapi.Deferred{API: n.api}, promapi.Options{
		Namespace:          cfg.Namespaces[0].Name,
		Timeout:            cfg.Query.Timeout,
		MaxSamples:         cfg.Query.MaxSamples,
		MaxExpressionBytes: cfg.Query.MaxExpressionBytes,
		MaxExpressionDepth: cfg.Query.MaxExpressionDepth,
		MaxConcurrency:     cfg.Query.MaxConcurrency,
		LookbackDelta:      cfg.Query.LookbackDelta,
		EvaluationInterval: cfg.Query.EvaluationInterval,
		Parallelism:        cfg.Query.Parallelism,
		DisableFastPath:    !cfg.Query.FastPathEnabled(),
		Limits:             n.limits,
		BuildInfo:          buildInfo(),
		Logger:             log,
		Exemplars:          n.api,
		BlockSize:          cfg.Namespaces[0].BlockSize.Milliseconds(),
		Namespaces:         namespaceNames(cfg.Namespaces),
		Rollups:            rollupResolutions(cfg.Namespaces),
		RawRetention:       cfg.Namespaces[0].Retention,
		RollupReader:       rollupReader{n},
	})
	if err != nil {
		closer.Close()
		return nil, err
	}
	qa.Register(n.api.Mux())
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		closer.Close()
		return nil, fmt.Errorf("listen http %s: %w", cfg.HTTP.Listen, err)
	}
	n.httpLn = ln
	sec.warnIfOpen(log, ln.Addr())
	rln, err := net.Listen("tcp", cfg.RPC.Listen)
	if err != nil {
		ln.Close()
		closer.Close()
		return nil, fmt.Errorf("listen rpc %s: %w", cfg.RPC.Listen, err)
	}
	n.rpcLn = rln
	if cfg.RPC.Advertise == "" || strings.HasSuffix(cfg.RPC.Advertise, ":0") {
		n.cfg.RPC.Advertise = rln.Addr().String()
	}
	return n, nil
}

// RPCAddr is the bound node RPC address.
func (n *Node) RPCAddr() string { return n.rpcLn.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// Topology is the node's placement view, nil before Run.
func (n *Node) Topology() *client.Topology { return n.topo }

// DB is the node's storage, nil until recovery finished.
func (n *Node) DB() *storage.Database { return n.db }

// Run serves until ctx is done, then shuts down cleanly. The HTTP server
// answers (503 on /ready) while storage recovers and shards bootstrap.
//
// Everything Run starts pushes its shutdown onto one stack, unwound in
// reverse order whether Run fails half-way through start-up or returns
// after serving: the order of start-up is the reverse of the order of
// shutdown, written once.
func (n *Node) Run(ctx context.Context) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Cross-site checks come first: a page in an operator's browser gets
	// no further than them, credentials or not.
	h := crosssite.Guard(n.sec.handler(promapi.Instrument(n.api.Handler(), n.scope.SubScope("query"))),
		crosssite.Options{LoopbackOnly: isLoopback(n.httpLn.Addr())})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 2)
	go func() { srvErr <- webconfig.Serve(n.httpLn, srv, n.cfg.HTTP.WebConfigFile, n.log) }()
	var stack cleanupStack
	// HTTP is the front door and calls everything else (the session, the
	// placement store, storage): it stops first, before the stack
	// unwinds, whether start-up failed half-way or the node served.
	defer func() {
		start := time.Now()
		shutdown(srv)
		err = errors.Join(err, stack.unwind())
		if err != nil {
			n.log.Error("node stopped", "id", n.cfg.ID, "took", time.Since(start), "err", err)
		} else {
			n.log.Info("node stopped", "id", n.cfg.ID, "took", time.Since(start))
		}
	}()
	stack.push("metrics", n.closer.Close)
	// Closed here in case Run fails before the gRPC server owns it (which
	// then closes it first; a second close only errs, and is ignored).
	stack.push("rpc listener", func() error { _ = n.rpcLn.Close(); return nil })
	// The consistency levels are parsed before anything starts: a level
	// the client does not know fails the start naming the field, instead
	// of a session that would count replicas by the zero level.
	wl, err := client.ParseWriteLevel(n.cfg.Cluster.WriteConsistency)
	if err != nil {
		return fmt.Errorf("config: cluster.writeConsistency: %w", err)
	}
	rl, err := client.ParseReadLevel(n.cfg.Cluster.ReadConsistency)
	if err != nil {
		return fmt.Errorf("config: cluster.readConsistency: %w", err)
	}

	// Own data (step 3) is read while etcd starts: neither needs the
	// other, and a seed's etcd member takes from half a second to seconds
	// on a loaded machine to start (its WAL, its election), which a
	// restart used to wait for before replaying the commit log (issue 30).
	// Whatever ends Run before step 3 takes the result waits for the
	// replay and closes the storage.
	type openedStorage struct {
		db  *storage.Database
		err error
	}
	storageCh := make(chan openedStorage, 1)
	go func() {
		db, err := n.openStorage()
		storageCh <- openedStorage{db, err}
	}()
	storageTaken := false
	defer func() {
		if !storageTaken {
			if o := <-storageCh; o.db != nil {
				err = errors.Join(err, o.db.Close())
			}
		}
	}()

	// 1. etcd: a seed runs its member; everyone connects as a client.
	if n.cfg.Etcd.Embedded.Enabled {
		e, err := startEmbeddedEtcd(n.cfg, freeBytes, n.log)
		if err != nil {
			return err
		}
		stack.push("embedded etcd", func() error { e.Close(); return nil })
	}
	store, closeStore, err := n.openPlacementStore()
	if err != nil {
		return err
	}
	stack.push("placement store", func() error { closeStore(); return nil })
	(&placementhttp.Handler{Store: store}).Register(n.api.Mux())

	// 2. The last placement seen, so reads and writes route while etcd is
	// unreachable.
	n.topo, err = client.NewTopology(vfs.OS(), filepath.Join(n.cfg.DataDir, "placement.json"))
	if err != nil {
		return err
	}
	con := n.registerConsole(store, n.reg)
	// The console's rates come from readings of the node's own counters
	// taken on a ticker, not per page view.
	conCtx, conStop := context.WithCancel(ctx)
	conDone := make(chan struct{})
	go func() { defer close(conDone); con.Run(conCtx) }()
	stack.push("console rates", func() error { conStop(); <-conDone; return nil })

	// 3. Own data first (filesets, then commit log): a whole cluster
	// restarted at once comes back without waiting on peers. Opened
	// above, alongside etcd.
	opened := <-storageCh
	storageTaken = true
	db, err := opened.db, opened.err
	if err != nil {
		return err
	}
	n.db = db
	stack.push("storage", func() error {
		if err := db.Close(); err != nil {
			return fmt.Errorf("close storage: %w", err)
		}
		return nil
	})
	// Exemplars and metadata from their snapshots; saved once more when
	// the node stops, after the session delivered what it still held.
	if damage := n.loadAux(); len(damage) > 0 {
		n.state.setDamage(append(slices.Clone(db.Recovery().Warnings()), damage...))
	}
	stack.push("exemplar/metadata snapshot", n.saveAux)
	// The collector's room for garbage follows the live heap (gctune): a
	// node holding many series does not keep as much again for garbage.
	// It starts once recovery is done: replaying the commit log builds the
	// whole heap in one go, and at a lower GOGC the collections on the way
	// would only delay the node's readiness.
	if t := gctune.New(gctune.Config{Percent: n.cfg.GC.Percent, MinPercent: n.cfg.GC.MinPercent, Headroom: n.cfg.GC.Headroom}); t != nil {
		gcCtx, gcStop := context.WithCancel(ctx)
		gcDone := make(chan struct{})
		go func() { defer close(gcDone); t.Run(gcCtx, time.Second) }()
		stack.push("gc tuner", func() error { gcStop(); <-gcDone; return nil })
	}

	// 4. Node RPC.
	rs := rpc.NewServer(db, newOwnership(n.topo, n.cfg.ID), rpc.ServerOptions{
		NodeID: n.cfg.ID, Logger: n.log,
		// The same knob paces both sides of peer streaming.
		MaxStreamBytesPerSecond: n.cfg.Bootstrap.MaxBytesPerSecond,
		Limits:                  n.limits,
		TLS:                     n.sec.rpcServer,
		Exemplars:               n.api.Exemplars(),
		Metadata:                n.api.Metadata(),
		Pushdown:                n.evaluator(db),
		PushdownParts:           n.partsEvaluator(db),
		Ready: func() (bool, string) {
			m := n.topo.Get()
			if m == nil {
				return false, "no placement"
			}
			p := bootstrap.PendingShards(m, n.cfg.ID)
			return p == 0, fmt.Sprintf("%d shards INITIALIZING", p)
		},
	})
	g := grpc.NewServer(rs.GRPCServerOptions()...)
	rs.Register(g)
	go func() { srvErr <- g.Serve(n.rpcLn) }()
	stack.push("rpc server", func() error { g.Stop(); return nil })

	// 5. The session routes every HTTP write and read by the placement.
	pairing := n.cfg.Cluster.PairedInitializingCounts == nil || *n.cfg.Cluster.PairedInitializingCounts
	hintOpts, closeHints, err := n.openHints()
	if err != nil {
		return err
	}
	if closeHints != nil {
		stack.push("hints", closeHints) // after the session stopped replaying
	}
	session, err := client.NewSession(client.Options{
		LocalID: n.cfg.ID, Local: db, Topology: n.topo, Evaluate: n.sessionEvaluator(db), EvaluateParts: n.sessionPartsEvaluator(db), EvaluateReader: n.rawEvaluator(),
		WriteLevel: wl, ReadLevel: rl, Pairing: pairing,
		HedgeAfter: n.cfg.Cluster.HedgeAfter, RequestTimeout: n.cfg.Cluster.RequestTimeout,
		MaxBatch: n.cfg.Cluster.MaxWriteBatch,
		Health: client.HealthOptions{
			Interval: n.cfg.Cluster.HealthCheckInterval,
			Timeout:  n.cfg.Cluster.HealthCheckTimeout,
			Failures: n.cfg.Cluster.HealthCheckFailures,
		},
		Hints:     hintOpts,
		Exemplars: n.api.Exemplars(), Metadata: n.api.Metadata(),
		Logger: n.log, Metrics: n.scope.SubScope("session"),
		Dial: client.DialRPCTLS(n.cfg.Cluster.RequestTimeout, n.sec.rpcClient),
	})
	if err != nil {
		return fmt.Errorf("cluster session: %w", err)
	}
	stack.push("session", session.Close)
	n.state.serve(session)
	n.state.setReason("no placement yet: waiting for etcd")

	// 6. Placement watch, bootstrap and shard release.
	dials := newDialCache(n.cfg.Cluster.RequestTimeout, n.sec.rpcClient)
	stack.push("bootstrap peers", func() error { dials.close(); return nil })
	restorer, closeRestore, err := n.openRestore(ctx, db)
	if err != nil {
		return err
	}
	if closeRestore != nil {
		stack.push("restore bucket", func() error { closeRestore(); return nil })
	}
	n.registerBackup(db, restorer)
	var restore bootstrap.RestoreSource
	if restorer != nil {
		restore = restorer
	}
	feed := newPlacementFeed(n.topo, newPlacementGauges(n.scope.SubScope("placement"), n.cfg.ID), n.log, n.cfg.ID)
	cu := newCatchUp(n.cfg.Bootstrap.CatchUpAfter, n.log.With("component", "bootstrap"))
	b, err := bootstrap.New(bootstrap.Options{
		InstanceID: n.cfg.ID, DB: db, Store: markAvailable{s: store, topo: n.topo, feed: feed}, Dial: dials.dial,
		Workers:               n.cfg.Bootstrap.Workers,
		ShardsPerFetch:        n.cfg.Bootstrap.ShardsPerFetch,
		MaxBytesPerSecond:     n.cfg.Bootstrap.MaxBytesPerSecond,
		MarkAvailableAttempts: n.cfg.Bootstrap.MarkAvailableAttempts,
		MarkAvailableBackoff:  n.cfg.Bootstrap.MarkAvailableBackoff,
		Restore:               restore,
		Marked:                cu.marked,
		Logger:                n.log, Metrics: n.scope.SubScope("bootstrap"),
	})
	if err != nil {
		// Only a config the node's own Validate let through gets here.
		return fmt.Errorf("bootstrap: %w", err)
	}
	var bg sync.WaitGroup
	bg.Go(func() { feed.run(ctx) })
	bg.Go(func() { n.watchPlacement(ctx, store, feed) })
	bg.Go(func() { n.reconcile(ctx, b) })
	bg.Go(func() { n.snapshotAux(ctx, n.cfg.Ingest.SnapshotInterval) })
	n.registerNamespaceStatus(db)
	if err := n.startRepair(ctx, db, dials, cu, &bg); err != nil {
		cancel()
		bg.Wait()
		return err
	}
	stack.push("background loops", func() error { cancel(); bg.Wait(); return nil })
	n.log.Info("node serving", "id", n.cfg.ID, "http", n.HTTPAddr(), "rpc", n.RPCAddr(), "data", n.cfg.DataDir)

	select {
	case <-ctx.Done():
		n.log.Info("node shutting down", "id", n.cfg.ID, "reason", context.Cause(ctx))
	case err = <-srvErr:
		err = fmt.Errorf("server: %w", err)
		n.log.Error("node shutting down", "id", n.cfg.ID, "reason", err)
	}
	n.state.setReason("shutting down")
	return err
}

// cleanupStack runs shutdown steps in the reverse order they were pushed.
type cleanupStack []cleanupStep

type cleanupStep struct {
	name string
	fn   func() error
}

func (s *cleanupStack) push(name string, fn func() error) {
	*s = append(*s, cleanupStep{name, fn})
}

// unwind runs every step, newest first, and joins their errors.
func (s *cleanupStack) unwind() error {
	var errs []error
	for i := len(*s) - 1; i >= 0; i-- {
		if err := (*s)[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("shut down %s: %w", (*s)[i].name, err))
		}
	}
	*s = nil
	return errors.Join(errs...)
}

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

func (n *Node) openStorage() (*storage.Database, error) {
	nss := make([]storage.NamespaceOptions, len(n.cfg.Namespaces))
	for i, c := range n.cfg.Namespaces {
		nss[i] = namespaceOptions(c)
	}
	mode := commitlog.ModeSync
	if n.cfg.CommitLog.Mode == "async" {
		mode = commitlog.ModeAsync
	}
	db, err := storage.Open(storage.Options{
		Dir:                 n.cfg.DataDir,
		Namespaces:          nss,
		NumShards:           uint32(n.cfg.Cluster.NumShards),
		CommitLogMode:       mode,
		CommitLogFlushEvery: n.cfg.CommitLog.FlushEvery,
		CommitLogMaxFile:    n.cfg.CommitLog.MaxFileSize,
		CommitLogMaxPending: n.cfg.CommitLog.MaxPendingBytes,
		TickEvery:           n.cfg.Storage.TickInterval,

		RestartSnapshot:         n.cfg.Storage.RestartSnapshot.On(),
		RestartSnapshotEvery:    n.cfg.Storage.RestartSnapshot.Every,
		RestartSnapshotLogBytes: n.cfg.Storage.RestartSnapshot.LogBytes,

		Logger:  n.log,
		Metrics: n.scope.SubScope("storage"),
		Limits:  n.limits,
	})
	if err != nil {
		return nil, fmt.Errorf("open storage in %s: %w", n.cfg.DataDir, err)
	}
	// Damage found on disk (logged and counted by storage) stays visible
	// on /ready until the next start.
	n.state.setDamage(db.Recovery().Warnings())
	return db, nil
}

// namespaceOptions turns a namespace's YAML form into storage's options
// (config is read here, in node, not by storage).
func namespaceOptions(c config.Namespace) storage.NamespaceOptions {
	return storage.NamespaceOptions{
		Name: c.Name, Retention: c.Retention, BlockSize: c.BlockSize,
		BufferPast: c.BufferPast, BufferFuture: c.BufferFuture,
		ColdWrites: c.ColdWritesEnabled(), Index: c.IndexEnabled(),
		RollupOf: c.RollupOf, Resolution: c.Resolution,
	}
}

// namespaceNames lists the configured namespaces' names in config order.
func namespaceNames(nss []config.Namespace) []string {
	out := make([]string, len(nss))
	for i, ns := range nss {
		out[i] = ns.Name
	}
	return out
}
