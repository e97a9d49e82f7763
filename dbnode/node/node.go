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
	"time"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/uber-go/tally/v4"
	promreporter "github.com/uber-go/tally/v4/prometheus"
)

// Node is one running tessera node.
type Node struct {
	cfg    config.Config
	log    *slog.Logger
	scope  tally.Scope
	closer io.Closer
	api    *httpapi.API

	httpLn net.Listener
	db     *storage.Database
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
	reporter := promreporter.NewReporter(promreporter.Options{})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		Prefix:         "tessera",
		CachedReporter: reporter,
		Separator:      promreporter.DefaultSeparator,
	}, time.Second)
	n := &Node{cfg: cfg, log: log, scope: scope, closer: closer}
	n.api = httpapi.New(httpapi.Options{
		Namespace:      cfg.Namespaces[0].Name,
		MaxBodyBytes:   cfg.HTTP.MaxBodyBytes,
		NumShards:      uint32(cfg.Cluster.NumShards),
		Logger:         log,
		Metrics:        scope.SubScope("http"),
		MetricsHandler: reporter.HTTPHandler(),
	})
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		closer.Close()
		return nil, fmt.Errorf("listen http %s: %w", cfg.HTTP.Listen, err)
	}
	n.httpLn = ln
	return n, nil
}

// HTTPAddr is the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// DB is the node's storage, nil until recovery finished.
func (n *Node) DB() *storage.Database { return n.db }

// Run serves until ctx is done, then shuts down cleanly. The HTTP server
// answers (503 on /ready) while storage recovers.
func (n *Node) Run(ctx context.Context) error {
	srv := &http.Server{Handler: n.api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(n.httpLn) }()
	defer n.closer.Close()

	db, err := n.openStorage()
	if err != nil {
		shutdown(srv)
		return err
	}
	n.db = db
	n.api.SetBackend(httpapi.Local{DB: db})
	n.api.SetReady("")
	n.log.Info("node ready", "http", n.HTTPAddr(), "data", n.cfg.DataDir)

	select {
	case <-ctx.Done():
	case err = <-srvErr:
		err = fmt.Errorf("http server: %w", err)
	}
	n.api.SetReady("shutting down")
	shutdown(srv)
	if cerr := db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close storage: %w", cerr))
	}
	return err
}

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

func (n *Node) openStorage() (*storage.Database, error) {
	nss := make([]storage.NamespaceOptions, len(n.cfg.Namespaces))
	for i, c := range n.cfg.Namespaces {
		nss[i] = storage.NamespaceFromConfig(c)
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
		TickEvery:           10 * time.Second,
		Logger:              n.log,
		Metrics:             n.scope.SubScope("storage"),
	})
	if err != nil {
		return nil, fmt.Errorf("open storage in %s: %w", n.cfg.DataDir, err)
	}
	return db, nil
}
