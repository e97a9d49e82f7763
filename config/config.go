// Package config is Tessera's YAML configuration: plain structs with yaml
// tags, Defaults() and Validate(). Every field has a default, so an empty
// file (or none) is a working single-node setup; unknown fields and bad
// values are errors that name the field.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/ident"
	"gopkg.in/yaml.v3"
)

// Config is the whole configuration of one `tessera node`.
type Config struct {
	// ID names this node in the placement. Default: "node1".
	ID string `yaml:"id"`
	// IsolationGroup is the rack/zone this node stands in. Default: "group1".
	IsolationGroup string `yaml:"isolationGroup"`
	// DataDir holds the commit log, filesets and the cached placement.
	DataDir string `yaml:"dataDir"`

	HTTP       HTTP        `yaml:"http"`
	RPC        RPC         `yaml:"rpc"`
	CommitLog  CommitLog   `yaml:"commitlog"`
	Storage    Storage     `yaml:"storage"`
	Namespaces []Namespace `yaml:"namespaces"`
	Query      Query       `yaml:"query"`
	Cluster    Cluster     `yaml:"cluster"`
	Etcd       Etcd        `yaml:"etcd"`
	Bootstrap  Bootstrap   `yaml:"bootstrap"`
	Limits     Limits      `yaml:"limits"`
	Hints      Hints       `yaml:"hints"`
	Ingest     Ingest      `yaml:"ingest"`
	Repair     Repair      `yaml:"repair"`
	GC         GC          `yaml:"gc"`
	Security   Security    `yaml:"security"`
}

// Ingest bounds what remote write brings besides samples, kept in memory
// per node: metric metadata (/api/v1/metadata) and exemplars
// (/api/v1/query_exemplars).
type Ingest struct {
	// MetadataMaxMetrics is how many metric names' metadata (type, unit,
	// help) are kept; the least recently written names go first. Default
	// 10000.
	MetadataMaxMetrics int `yaml:"metadataMaxMetrics"`
	// MaxExemplars is how many exemplars are kept (the newest), as
	// Prometheus' --storage.exemplars.exemplars-limit. Default 100000.
	MaxExemplars int `yaml:"maxExemplars"`
	// SnapshotInterval is how often the exemplars and metadata are written
	// to their snapshot files under <dataDir>/aux (and once more at a
	// graceful stop), so a restart does not empty them; a crash loses at
	// most this much of them. Default 1m.
	SnapshotInterval time.Duration `yaml:"snapshotInterval"`
}

// HTTP is the Prometheus-facing HTTP server.
type HTTP struct {
	// Listen address. Default 127.0.0.1:7201.
	Listen string `yaml:"listen"`
	// MaxBodyBytes bounds a remote write/read body, compressed and
	// decompressed. Default 32 MiB.
	MaxBodyBytes int64 `yaml:"maxBodyBytes" unit:"bytes"`
	// SeriesCacheSize is how many series remote write remembers by the
	// bytes of their labels, to skip decoding and looking up a series it
	// saw before (each costs about 70 bytes when this node stores the
	// series, whose ID it shares, and its labels come sorted as Prometheus
	// sends them: a hit compares them with the ID; unsorted labels cost
	// their bytes on top, a series stored elsewhere its ID's bytes). Set
	// it above the number of active series: it
	// keeps two generations of this many, so it hits for that many series
	// written round-robin and holds up to twice as many while series churn
	// (those not written for two generations age out). Default 1048576.
	SeriesCacheSize int `yaml:"seriesCacheSize"`
	// WebConfigFile is a Prometheus web configuration file
	// (exporter-toolkit's web.config.file format): tls_server_config turns
	// on HTTPS (re-read at every handshake, so replaced certificates take
	// effect without a restart), basic_auth_users lists users with bcrypt
	// password hashes; each needs a role in Auth.Users. Default: none
	// (plain HTTP).
	WebConfigFile string `yaml:"webConfigFile"`
	// Auth grants roles to basic auth users and bearer tokens. See
	// HTTPAuth.
	Auth HTTPAuth `yaml:"auth"`
}

// RPC is the node-to-node gRPC server.
type RPC struct {
	// Listen address. Default 127.0.0.1:9000.
	Listen string `yaml:"listen"`
	// Advertise is the host:port other nodes dial; default: Listen.
	Advertise string `yaml:"advertise"`
	// TLS turns on mutual TLS for node-to-node RPC, both ways: the server
	// refuses peers without a certificate signed by caFile, and this node
	// presents its certificate when it dials peers (writes, reads,
	// bootstrap). certFile, keyFile and caFile all or none. Default: off.
	TLS TLSFiles `yaml:"tls"`
}

// CommitLog configures durability.
type CommitLog struct {
	// Mode is "sync" (acknowledge after fsync) or "async" (fsync every
	// FlushEvery). Default sync.
	Mode string `yaml:"mode"`
	// FlushEvery is the async fsync interval. Default 1s.
	FlushEvery time.Duration `yaml:"flushEvery"`
	// MaxFileSize rotates the active file past this many bytes. Default 256 MiB.
	MaxFileSize int64 `yaml:"maxFileSize" unit:"bytes"`
	// MaxPendingBytes bounds buffered, unwritten data; past it writes get 503.
	// Default 64 MiB.
	MaxPendingBytes int64 `yaml:"maxPendingBytes" unit:"bytes"`
}

// Namespace is one retention/resolution domain.
type Namespace struct {
	Name         string        `yaml:"name"`
	Retention    time.Duration `yaml:"retention"`
	BlockSize    time.Duration `yaml:"blockSize"`
	BufferPast   time.Duration `yaml:"bufferPast"`
	BufferFuture time.Duration `yaml:"bufferFuture"`
	// ColdWrites accepts samples older than bufferPast (inside retention);
	// they are merged into the block's fileset by a later flush. Default on.
	ColdWrites *bool `yaml:"coldWrites"`
	// Index keeps the tag index for label matchers. Default on.
	Index *bool `yaml:"index"`
	// RollupOf makes this namespace the rollup of the named one: per
	// series and per Resolution window it holds count, sum, min, max, last
	// and a reset-aware counter increase of the source's samples
	// (dbnode/rollup, docs/rollups.md). A rollup may itself be rolled up
	// (raw 15d -> 5m 90d -> 1h 2y). Default: none (a raw namespace).
	RollupOf string `yaml:"rollupOf"`
	// Resolution is a rollup namespace's window: it divides blockSize and
	// the source's blockSize, and is a multiple of the source's resolution
	// (so windows nest down a chain). Only with rollupOf.
	Resolution time.Duration `yaml:"resolution"`
}

// IsRollup reports whether the namespace is the rollup of another.
func (n Namespace) IsRollup() bool { return n.RollupOf != "" }

// ColdWritesEnabled reports the effective cold-writes switch.
func (n Namespace) ColdWritesEnabled() bool { return n.ColdWrites == nil || *n.ColdWrites }

// IndexEnabled reports the effective index switch.
func (n Namespace) IndexEnabled() bool { return n.Index == nil || *n.Index }

// Query bounds PromQL evaluation. The defaults are Prometheus' flags.
type Query struct {
	// Timeout bounds one query's evaluation (--query.timeout). Default 2m.
	Timeout time.Duration `yaml:"timeout"`
	// MaxSamples bounds the samples one query holds in memory at once
	// (--query.max-samples). Default 50000000.
	MaxSamples int `yaml:"maxSamples"`
	// MaxConcurrency bounds the queries evaluating at once; more wait for
	// a slot within their timeout (--query.max-concurrency). Default 20.
	MaxConcurrency int `yaml:"maxConcurrency"`
	// LookbackDelta as in Prometheus. Default 5m.
	LookbackDelta time.Duration `yaml:"lookbackDelta"`
	// EvaluationInterval is the step of subqueries written without one
	// (x[30m:]), as Prometheus' global evaluation_interval. Default 1m.
	EvaluationInterval time.Duration `yaml:"evaluationInterval"`
	// MaxExpressionBytes bounds a PromQL expression's length and
	// MaxExpressionDepth its nesting (operators and brackets; a chain
	// a + b + ... of n terms is n-1 deep), checked before parsing: past
	// either a query is refused (400, counted in
	// tessera_limits_refused{limit="query.maxExpression..."}).
	// Prometheus has none; its parser and engine cost grows with the
	// square of the depth, uncancellable while parsing (8 s at 8,000
	// terms). Defaults 65536 (64 KiB) and 1000 (a chain a + b + ... of
	// 1,001 terms): well above what dashboards send (they nest tens of
	// levels; a Grafana multi-value variable of 3,000 hosts expands into
	// a regex of about 60 KB; VictoriaMetrics' -search.maxQueryLen is 16
	// KiB); the engine's cost grows with an expression's nodes times its
	// depth, so the costliest query within both, a balanced sum of
	// parenthesised 1,000-term chains of 1 filling 64 KiB, takes seconds
	// of a core, not minutes (docs/promql.md). -1: no bound.
	MaxExpressionBytes int `yaml:"maxExpressionBytes" unit:"bytes"`
	MaxExpressionDepth int `yaml:"maxExpressionDepth"`
	// Parallelism bounds the goroutines one query spends computing
	// rate, increase, delta and instant selectors over its series (the
	// fast path: Prometheus' engine alone uses one). Default 0: GOMAXPROCS.
	Parallelism int `yaml:"parallelism"`
	// FastPath turns that parallel computation on; answers are the same
	// to the bit either way. Default true; false is the escape hatch.
	FastPath *bool `yaml:"fastPath"`
	// Pushdown: in a cluster, sum/count/avg aggregations are computed by
	// the replicas, each read group's shards split among them, and only
	// partial aggregates cross the network (docs/query.md). Default true:
	// at the default read level it answers in about the time of raw reads
	// on one shared host (where the nodes have their own cores the parts
	// run in parallel; not measured), with 89-99.8% fewer bytes received for counts and sums; false reads
	// raw series (with RF equal to the cluster size and read level one,
	// where every raw read is local, that is a little faster).
	Pushdown *bool `yaml:"pushdown"`
}

// FastPathEnabled reports the effective query.fastPath switch.
func (q Query) FastPathEnabled() bool { return q.FastPath == nil || *q.FastPath }

// PushdownEnabled reports the effective query.pushdown switch (off with
// the fast path: the pushdown is its evaluator).
func (q Query) PushdownEnabled() bool {
	return (q.Pushdown == nil || *q.Pushdown) && q.FastPathEnabled()
}

// Cluster configures routing and consistency.
type Cluster struct {
	// Name is the placement's cluster name in etcd. Default "default".
	Name string `yaml:"name"`
	// WriteConsistency: one, majority, all. Default majority.
	WriteConsistency string `yaml:"writeConsistency"`
	// ReadConsistency: one, unstrict_majority, majority, all. Default unstrict_majority.
	ReadConsistency string `yaml:"readConsistency"`
	// PairedInitializingCounts lets an INITIALIZING owner paired with the
	// LEAVING owner it replaces count as one replica. Default on.
	PairedInitializingCounts *bool `yaml:"pairedInitializingCounts"`
	// HedgeAfter: a read still short of its consistency level after this
	// long asks the next readable replica of the shards concerned (and
	// again after each further HedgeAfter), at every read level. Default
	// 100ms.
	HedgeAfter time.Duration `yaml:"hedgeAfter"`
	// RequestTimeout bounds one cluster read or write, and the replicas a
	// write still delivers to after it met its level. Default 10s.
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	// MaxWriteBatch is the most samples one node-to-node write RPC
	// carries; larger writes are split, smaller concurrent ones coalesced.
	// Default 16384.
	MaxWriteBatch int `yaml:"maxWriteBatch"`
	// HealthCheckInterval is how often every peer node is probed. A peer
	// that fails HealthCheckFailures probes in a row is marked down: calls
	// to it fail at once naming it, calls in flight to it are cancelled,
	// and reads ask other replicas first; the first probe that succeeds
	// marks it up. So a frozen replica fails a read or write at level all
	// within about interval + failures x timeout instead of after
	// requestTimeout. Default 1s.
	HealthCheckInterval time.Duration `yaml:"healthCheckInterval"`
	// HealthCheckTimeout bounds one probe. The probe does no work on the
	// peer, so even a loaded peer (2 cores, race detector) answers far
	// within the default. Default 1s.
	HealthCheckTimeout time.Duration `yaml:"healthCheckTimeout"`
	// HealthCheckFailures is how many consecutive failed probes mark a peer
	// down. Writes skip a down peer (it misses them until repaired), so
	// one slow probe alone must not do it. Default 2.
	HealthCheckFailures int `yaml:"healthCheckFailures"`
	// AutoInit creates a one-instance placement (RF 1, NumShards shards) for
	// this node when none exists. Default: on only when no config file is
	// given (the embedded default).
	AutoInit bool `yaml:"autoInit"`
	// NumShards of an auto-initialised placement, and the shard count the
	// HTTP API and storage assume until the placement says otherwise.
	// Default ident.DefaultNumShards (4096).
	NumShards int `yaml:"numShards"`
}

// Etcd says where the placement lives and whether this node is a seed.
type Etcd struct {
	// Endpoints of the etcd cluster. Default: this node's embedded server.
	Endpoints []string `yaml:"endpoints"`
	// Embedded runs an etcd member inside this node (a seed).
	Embedded EmbeddedEtcd `yaml:"embedded"`
	// DialTimeout for the etcd client. Default 5s.
	DialTimeout time.Duration `yaml:"dialTimeout"`
	// TLS for the etcd client: caFile verifies the servers, certFile and
	// keyFile are this node's client certificate (for an etcd that
	// requires one). Default: plain.
	TLS TLSFiles `yaml:"tls"`
	// Username and Password (or PasswordFile) authenticate to an etcd
	// with auth enabled. Default: none.
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"passwordFile"`
}

// EmbeddedEtcd configures a seed's etcd member.
type EmbeddedEtcd struct {
	Enabled bool `yaml:"enabled"`
	// Name of this member. Default: the node ID.
	Name string `yaml:"name"`
	// ClientURL to listen and advertise. Default http://127.0.0.1:2379.
	ClientURL string `yaml:"clientURL"`
	// PeerURL to listen and advertise. Default http://127.0.0.1:2380.
	PeerURL string `yaml:"peerURL"`
	// InitialCluster: name=peerURL,... Default: this member alone.
	InitialCluster string `yaml:"initialCluster"`
	// InitialClusterState is "new" when the seeds in InitialCluster start
	// a cluster together, "existing" when this member joins a running one
	// after `tessera etcd add-member` (docs/etcd.md). Read only when the
	// member's data directory is empty. Default "new".
	InitialClusterState string `yaml:"initialClusterState"`
	// ListenClientURL and ListenPeerURL, when set, are where the member
	// listens if that differs from what it advertises (0.0.0.0 in a
	// container). Default: the advertised URLs.
	ListenClientURL string `yaml:"listenClientURL"`
	ListenPeerURL   string `yaml:"listenPeerURL"`
	// ClientTLS serves the client URL over TLS (clientURL https://);
	// with caFile, clients must present a certificate signed by it.
	ClientTLS TLSFiles `yaml:"clientTLS"`
	// PeerTLS secures member-to-member traffic (peerURL https://); with
	// caFile, members must present a certificate signed by it.
	PeerTLS TLSFiles `yaml:"peerTLS"`
}

// Storage configures the engine's background work.
type Storage struct {
	// TickInterval is how often the node flushes sealed blocks to
	// filesets, expires data past retention and deletes commit log files
	// whose data is all flushed. Shorter ticks flush a block sooner after
	// bufferPast ends; each tick walks every series. Default 10s.
	TickInterval time.Duration `yaml:"tickInterval"`
	// RestartSnapshot: a copy of unflushed memory written in the
	// background, which a restart after a crash loads in place of the
	// commit log files it covers (docs/internals/storage.md, "Recovery
	// after a crash").
	RestartSnapshot RestartSnapshot `yaml:"restartSnapshot"`
}

// RestartSnapshot configures the restart snapshot. A snapshot is never the
// only copy of anything: the commit log files it covers are kept until
// their data is flushed, and a missing or damaged snapshot means the
// whole log is replayed.
type RestartSnapshot struct {
	// Enabled writes snapshots and loads them at start. Default true:
	// a restart from one costs 0.7-0.8x the CPU of the whole log's
	// replay at 1 M series and 0.7-0.8x at 5 M (docs/performance.md,
	// "snap30: the snapshot restart's index on every core"); each
	// snapshot walks all of memory (0.7 s at 1 M series, 3-5 s at 5 M,
	// at most once per Every). Off: a snapshot left by an earlier run is
	// removed at start.
	Enabled *bool `yaml:"enabled"`
	// Every is the least time between two snapshots. Default 1m.
	Every time.Duration `yaml:"every"`
	// LogBytes is how much the commit log must have grown since the last
	// snapshot for the next one (each costs a walk and copy of all of
	// memory; the restart replays at most about this much of the log).
	// Default 64 MiB.
	LogBytes int64 `yaml:"logBytes" unit:"bytes"`
}

// On reports the effective restartSnapshot.enabled switch (Defaults
// fills it; nil, before Defaults, is off).
func (r RestartSnapshot) On() bool { return r.Enabled != nil && *r.Enabled }

// Bootstrap configures peer streaming of INITIALIZING shards and the
// mark-available CAS that ends it.
type Bootstrap struct {
	// MaxBytesPerSecond rate-limits peer streaming on both sides. 0 = unlimited.
	MaxBytesPerSecond int64 `yaml:"maxBytesPerSecond" unit:"bytes"`
	// Workers is how many batches of shards stream at once. Default 4.
	Workers int `yaml:"workers"`
	// ShardsPerFetch is how many shards with the same peers share one
	// batch (one metadata request per peer). Default 64.
	ShardsPerFetch int `yaml:"shardsPerFetch"`
	// MarkAvailableAttempts is how many times a round tries the CAS that
	// marks its bootstrapped shards AVAILABLE (re-reading the placement
	// between attempts, never re-streaming) before they go back to
	// pending. Default 5.
	MarkAvailableAttempts int `yaml:"markAvailableAttempts"`
	// MarkAvailableBackoff is the wait before the second attempt, doubled
	// before each further one. Default 200ms.
	MarkAvailableBackoff time.Duration `yaml:"markAvailableBackoff"`
	// CatchUpAfter is how long after marking shards AVAILABLE the node
	// compares them with their other owners up to now and pulls what it
	// lacks (repair.CatchUp): a write acknowledged by the other owners but
	// not in what the streaming source sent (its copy missed the write, or
	// a coordinator still routing by the placement before the move sent
	// it there after the stream) would otherwise wait for the periodic
	// repair. Long enough for such in-flight writes to land: default 10s
	// (cluster.requestTimeout's default, the longest a write is in
	// flight). It runs whether or not repair.enabled is set; with
	// repair.compareOnly it only reports, as repair does.
	CatchUpAfter time.Duration `yaml:"catchUpAfter"`
	// Restore turns on the backup bootstrapper: shards of a fresh cluster
	// (no owner to stream from) are loaded from a backup instead of
	// starting empty. docs/backup.md.
	Restore Restore `yaml:"restore"`
}

// Restore names the backup a fresh cluster's nodes restore their shards
// from: both fields or neither.
type Restore struct {
	// BucketConfigFile is objstore's bucket configuration (type: S3,
	// FILESYSTEM, ...), the file `tessera backup create --bucket-config`
	// wrote the backup with.
	BucketConfigFile string `yaml:"bucketConfigFile"`
	// Backup is the backup ID (`tessera backup list`).
	Backup string `yaml:"backup"`
}

// Enabled reports whether a restore is configured.
func (r Restore) Enabled() bool { return r.BucketConfigFile != "" || r.Backup != "" }

// Limits bound what one client can make a node store or compute; each
// refusal names its field and is counted in
// tessera_limits_refused_total{limit="limits.<field>"}. Names follow Grafana
// Mimir's limits; docs/limits.md gives the reason for each
// default. A count limit of 0 takes its default; -1 turns it off. A
// duration limit of 0 takes its default; a negative one turns it off.
// Converts to limits.Config (same fields).
type Limits struct {
	// MaxLabelNameLength in bytes (Mimir max_label_name_length). Default 1024.
	MaxLabelNameLength int `yaml:"maxLabelNameLength"`
	// MaxLabelValueLength in bytes, __name__ included (Mimir
	// max_label_value_length). At most 16777215 (PromQL's label sets
	// cannot hold longer). Default 2048.
	MaxLabelValueLength int `yaml:"maxLabelValueLength"`
	// MaxLabelNamesPerSeries (Mimir max_label_names_per_series). Default 64.
	MaxLabelNamesPerSeries int `yaml:"maxLabelNamesPerSeries"`
	// MaxSeriesPerRequest and MaxSamplesPerRequest bound one remote write
	// request. Defaults 200000 and 1000000.
	MaxSeriesPerRequest  int `yaml:"maxSeriesPerRequest"`
	MaxSamplesPerRequest int `yaml:"maxSamplesPerRequest"`
	// MaxActiveSeries is the most series this node holds in memory; a
	// write creating one more is refused with 429, samples of series it
	// holds are still taken (Mimir max_global_series_per_user, per node
	// here). Default 1000000.
	MaxActiveSeries int `yaml:"maxActiveSeries"`
	// MaxFetchedSeriesPerQuery bounds the series one query (PromQL,
	// series, remote read) fetches (Mimir max_fetched_series_per_query).
	// Default 1000000.
	MaxFetchedSeriesPerQuery int `yaml:"maxFetchedSeriesPerQuery"`
	// MaxQueryLength bounds end - start of a range query (Mimir
	// max_total_query_length). Default 721h (30 days and an hour, as Loki).
	MaxQueryLength time.Duration `yaml:"maxQueryLength"`
	// MaxQueryLookback refuses queries starting further back than this
	// (Mimir max_query_lookback). Default off: retention bounds it.
	MaxQueryLookback time.Duration `yaml:"maxQueryLookback"`
	// MaxSeriesPerFetch bounds the series IDs one node RPC Fetch names
	// (repair pulls repair.seriesPerFetch at a time, default 256): a
	// request for 200,000 IDs held a server for seconds. Default 10000.
	MaxSeriesPerFetch int `yaml:"maxSeriesPerFetch"`
	// MaxMetadataLength bounds a metric metadata record's metric name,
	// help and unit, each, in bytes (Mimir max_metadata_length). A longer
	// record is dropped from a remote write (counted; the samples are
	// stored) and refused over node RPC. Default 1024.
	MaxMetadataLength int `yaml:"maxMetadataLength"`
}

// Hints configures hinted handoff: the samples a replica did not
// acknowledge are kept by the coordinating node under <dataDir>/hints/
// and replayed to it once it answers again (docs/internals/write.md, Hints).
type Hints struct {
	// Enabled turns hinted handoff on. Default true.
	Enabled *bool `yaml:"enabled"`
	// MaxBytesPerTarget bounds one target's queue on disk; past it the
	// oldest hints are dropped (counted, logged). Default 1 GiB.
	MaxBytesPerTarget int64 `yaml:"maxBytesPerTarget" unit:"bytes"`
	// MaxAge: older hints are dropped instead of replayed. Default 3h.
	MaxAge time.Duration `yaml:"maxAge"`
	// ReplayBytesPerSecond paces each target's replay (bytes of hints on
	// disk). 0 = unpaced. Default 8 MiB.
	ReplayBytesPerSecond int64 `yaml:"replayBytesPerSecond" unit:"bytes"`
}

// Default returns the embedded default: one seed node on loopback.
func Default() Config {
	var c Config
	c.Defaults()
	c.Etcd.Embedded.Enabled = true
	c.Cluster.AutoInit = true
	return c
}

// Defaults fills every zero field with its default.
func (c *Config) Defaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	defDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ID, "node1")
	def(&c.IsolationGroup, "group1")
	def(&c.DataDir, "./data")
	def(&c.HTTP.Listen, "127.0.0.1:7201")
	if c.HTTP.MaxBodyBytes == 0 {
		c.HTTP.MaxBodyBytes = 32 << 20
	}
	if c.HTTP.SeriesCacheSize == 0 {
		c.HTTP.SeriesCacheSize = 1 << 20
	}
	def(&c.RPC.Listen, "127.0.0.1:9000")
	def(&c.RPC.Advertise, c.RPC.Listen)
	def(&c.CommitLog.Mode, "sync")
	defDur(&c.CommitLog.FlushEvery, time.Second)
	if c.CommitLog.MaxFileSize == 0 {
		c.CommitLog.MaxFileSize = 256 << 20
	}
	if c.CommitLog.MaxPendingBytes == 0 {
		c.CommitLog.MaxPendingBytes = 64 << 20
	}
	defDur(&c.Storage.TickInterval, 10*time.Second)
	if c.Storage.RestartSnapshot.Enabled == nil {
		on := true
		c.Storage.RestartSnapshot.Enabled = &on
	}
	defDur(&c.Storage.RestartSnapshot.Every, time.Minute)
	if c.Storage.RestartSnapshot.LogBytes == 0 {
		c.Storage.RestartSnapshot.LogBytes = 64 << 20
	}
	if len(c.Namespaces) == 0 {
		c.Namespaces = []Namespace{{Name: "default"}}
	}
	for i := range c.Namespaces {
		n := &c.Namespaces[i]
		def(&n.Name, "default")
		defDur(&n.Retention, 48*time.Hour)
		defDur(&n.BlockSize, 2*time.Hour)
		defDur(&n.BufferPast, 10*time.Minute)
		defDur(&n.BufferFuture, 2*time.Minute)
	}
	defDur(&c.Query.Timeout, 2*time.Minute)
	if c.Query.MaxSamples == 0 {
		c.Query.MaxSamples = 50_000_000
	}
	if c.Query.MaxConcurrency == 0 {
		c.Query.MaxConcurrency = 20
	}
	defDur(&c.Query.LookbackDelta, 5*time.Minute)
	defDur(&c.Query.EvaluationInterval, time.Minute)
	if c.Query.MaxExpressionBytes == 0 {
		c.Query.MaxExpressionBytes = 64 << 10
	}
	if c.Query.MaxExpressionDepth == 0 {
		c.Query.MaxExpressionDepth = 1000
	}
	def(&c.Cluster.Name, "default")
	def(&c.Cluster.WriteConsistency, "majority")
	def(&c.Cluster.ReadConsistency, "unstrict_majority")
	defDur(&c.Cluster.HedgeAfter, 100*time.Millisecond)
	defDur(&c.Cluster.RequestTimeout, 10*time.Second)
	if c.Cluster.MaxWriteBatch == 0 {
		c.Cluster.MaxWriteBatch = 16384
	}
	defDur(&c.Cluster.HealthCheckInterval, time.Second)
	defDur(&c.Cluster.HealthCheckTimeout, time.Second)
	if c.Cluster.HealthCheckFailures == 0 {
		c.Cluster.HealthCheckFailures = 2
	}
	if c.Cluster.NumShards == 0 {
		c.Cluster.NumShards = ident.DefaultNumShards
	}
	def(&c.Etcd.Embedded.Name, c.ID)
	def(&c.Etcd.Embedded.ClientURL, "http://127.0.0.1:2379")
	def(&c.Etcd.Embedded.PeerURL, "http://127.0.0.1:2380")
	def(&c.Etcd.Embedded.InitialCluster, c.Etcd.Embedded.Name+"="+c.Etcd.Embedded.PeerURL)
	def(&c.Etcd.Embedded.InitialClusterState, "new")
	if len(c.Etcd.Endpoints) == 0 {
		c.Etcd.Endpoints = []string{trimScheme(c.Etcd.Embedded.ClientURL)}
	}
	defDur(&c.Etcd.DialTimeout, 5*time.Second)
	if c.Bootstrap.Workers == 0 {
		c.Bootstrap.Workers = 4
	}
	if c.Bootstrap.ShardsPerFetch == 0 {
		c.Bootstrap.ShardsPerFetch = 64
	}
	if c.Bootstrap.MarkAvailableAttempts == 0 {
		c.Bootstrap.MarkAvailableAttempts = 5
	}
	defDur(&c.Bootstrap.MarkAvailableBackoff, 200*time.Millisecond)
	defDur(&c.Bootstrap.CatchUpAfter, 10*time.Second)
	c.Limits.defaults()
	c.Hints.defaults()
	c.Repair.defaults()
	c.GC.defaults()
	if c.Ingest.MetadataMaxMetrics == 0 {
		c.Ingest.MetadataMaxMetrics = 10000
	}
	if c.Ingest.MaxExemplars == 0 {
		c.Ingest.MaxExemplars = 100000
	}
	defDur(&c.Ingest.SnapshotInterval, time.Minute)
}

func (h *Hints) defaults() {
	if h.Enabled == nil {
		on := true
		h.Enabled = &on
	}
	if h.MaxBytesPerTarget == 0 {
		h.MaxBytesPerTarget = 1 << 30
	}
	if h.MaxAge == 0 {
		h.MaxAge = 3 * time.Hour
	}
	if h.ReplayBytesPerSecond == 0 {
		h.ReplayBytesPerSecond = 8 << 20
	}
}

func (l *Limits) defaults() {
	defInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defInt(&l.MaxLabelNameLength, 1024)
	defInt(&l.MaxLabelValueLength, 2048)
	defInt(&l.MaxLabelNamesPerSeries, 64)
	defInt(&l.MaxSeriesPerRequest, 200_000)
	defInt(&l.MaxSamplesPerRequest, 1_000_000)
	defInt(&l.MaxActiveSeries, 1_000_000)
	defInt(&l.MaxFetchedSeriesPerQuery, 1_000_000)
	defInt(&l.MaxSeriesPerFetch, 10_000)
	defInt(&l.MaxMetadataLength, 1024)
	if l.MaxQueryLength == 0 {
		l.MaxQueryLength = 721 * time.Hour
	}
}

func trimScheme(u string) string {
	for _, p := range []string{"http://", "https://"} {
		if len(u) > len(p) && u[:len(p)] == p {
			return u[len(p):]
		}
	}
	return u
}

// Load reads, defaults and validates a YAML config file.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly (unknown fields are errors), fills defaults
// and validates.
func Parse(r io.Reader) (Config, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return Config{}, err
	}
	var c Config
	if len(bytes.TrimSpace(raw)) > 0 {
		// Prometheus' duration units (7d, 2w) next to Go's; see duration.go.
		if raw, err = normalizeDurations(raw); err != nil {
			return Config{}, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, withSourceLines(err, raw)
		}
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// withSourceLines makes yaml's "line N: cannot unmarshal" errors name the
// field by quoting the offending source line.
func withSourceLines(err error, raw []byte) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	lines := bytes.Split(raw, []byte("\n"))
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		var n int
		if _, serr := fmt.Sscanf(m, "line %d:", &n); serr == nil && n >= 1 && n <= len(lines) {
			m = fmt.Sprintf("%s (at %q)", m, strings.TrimSpace(string(lines[n-1])))
		}
		msgs = append(msgs, m)
	}
	return fmt.Errorf("yaml: %s", strings.Join(msgs, "; "))
}
