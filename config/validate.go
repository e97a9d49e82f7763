package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Validate checks every field and returns all problems at once, each
// naming its field by its YAML path.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if strings.ContainsAny(c.ID, " /\t\n") {
		bad("id", "%q must not contain spaces or slashes", c.ID)
	}
	checkAddr := func(field, v string) {
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(field, "%q is not host:port: %v", v, err)
		}
	}
	checkAddr("http.listen", c.HTTP.Listen)
	checkAddr("rpc.listen", c.RPC.Listen)
	checkAddr("rpc.advertise", c.RPC.Advertise)
	if c.HTTP.MaxBodyBytes < 0 {
		bad("http.maxBodyBytes", "must be positive, got %d", c.HTTP.MaxBodyBytes)
	}
	if c.HTTP.SeriesCacheSize < 0 {
		bad("http.seriesCacheSize", "must be positive, got %d", c.HTTP.SeriesCacheSize)
	}
	switch c.CommitLog.Mode {
	case "sync", "async":
	default:
		bad("commitlog.mode", "must be sync or async, got %q", c.CommitLog.Mode)
	}
	if c.CommitLog.FlushEvery < 0 {
		bad("commitlog.flushEvery", "must be positive, got %v", c.CommitLog.FlushEvery)
	}
	if c.CommitLog.MaxFileSize < 1<<20 {
		bad("commitlog.maxFileSize", "must be at least 1 MiB, got %d", c.CommitLog.MaxFileSize)
	}
	if c.CommitLog.MaxPendingBytes < 1<<20 {
		bad("commitlog.maxPendingBytes", "must be at least 1 MiB, got %d", c.CommitLog.MaxPendingBytes)
	}
	if c.Storage.RestartSnapshot.Every < 0 {
		bad("storage.restartSnapshot.every", "must be positive, got %v", c.Storage.RestartSnapshot.Every)
	}
	if c.Storage.RestartSnapshot.LogBytes < 0 {
		bad("storage.restartSnapshot.logBytes", "must be positive, got %d", c.Storage.RestartSnapshot.LogBytes)
	}
	if c.Storage.TickInterval < 100*time.Millisecond {
		bad("storage.tickInterval", "must be at least 100ms, got %v", c.Storage.TickInterval)
	}
	seen := map[string]bool{}
	for i, n := range c.Namespaces {
		f := func(name string) string { return fmt.Sprintf("namespaces[%d].%s", i, name) }
		if n.Name == "" || strings.ContainsAny(n.Name, " /\\.\t\n") {
			bad(f("name"), "%q must be a non-empty name without spaces, dots or slashes", n.Name)
		}
		if seen[n.Name] {
			bad(f("name"), "%q is defined twice", n.Name)
		}
		seen[n.Name] = true
		if n.BlockSize < time.Minute || n.BlockSize%time.Minute != 0 {
			bad(f("blockSize"), "must be a whole number of minutes >= 1m, got %v", n.BlockSize)
		}
		if n.Retention < n.BlockSize {
			bad(f("retention"), "%v is shorter than blockSize %v", n.Retention, n.BlockSize)
		}
		if n.BufferPast <= 0 || n.BufferPast >= n.BlockSize {
			bad(f("bufferPast"), "must be > 0 and shorter than blockSize %v, got %v", n.BlockSize, n.BufferPast)
		}
		if n.BufferFuture <= 0 {
			bad(f("bufferFuture"), "must be > 0, got %v", n.BufferFuture)
		}
	}
	validateRollups(c.Namespaces, bad)
	if c.Query.Timeout <= 0 {
		bad("query.timeout", "must be > 0, got %v", c.Query.Timeout)
	}
	if c.Query.MaxSamples <= 0 {
		bad("query.maxSamples", "must be > 0, got %d", c.Query.MaxSamples)
	}
	if c.Query.MaxConcurrency <= 0 {
		bad("query.maxConcurrency", "must be > 0, got %d", c.Query.MaxConcurrency)
	}
	if c.Query.LookbackDelta <= 0 {
		bad("query.lookbackDelta", "must be > 0, got %v", c.Query.LookbackDelta)
	}
	if c.Query.EvaluationInterval <= 0 {
		bad("query.evaluationInterval", "must be > 0, got %v", c.Query.EvaluationInterval)
	}
	if c.Query.MaxExpressionBytes < -1 {
		bad("query.maxExpressionBytes", "must be positive, or -1 for no limit, got %d", c.Query.MaxExpressionBytes)
	}
	if c.Query.MaxExpressionDepth < -1 {
		bad("query.maxExpressionDepth", "must be positive, or -1 for no limit, got %d", c.Query.MaxExpressionDepth)
	}
	if c.Query.Parallelism < 0 {
		bad("query.parallelism", "must be >= 0 (0: GOMAXPROCS), got %d", c.Query.Parallelism)
	}
	switch c.Cluster.WriteConsistency {
	case "one", "majority", "all":
	default:
		bad("cluster.writeConsistency", "must be one, majority or all, got %q", c.Cluster.WriteConsistency)
	}
	switch c.Cluster.ReadConsistency {
	case "one", "unstrict_majority", "majority", "all":
	default:
		bad("cluster.readConsistency", "must be one, unstrict_majority, majority or all, got %q", c.Cluster.ReadConsistency)
	}
	if c.Cluster.NumShards <= 0 || c.Cluster.NumShards > 1<<16 {
		bad("cluster.numShards", "must be in 1..65536, got %d", c.Cluster.NumShards)
	}
	if c.Cluster.HedgeAfter <= 0 {
		bad("cluster.hedgeAfter", "must be > 0, got %v", c.Cluster.HedgeAfter)
	}
	if c.Cluster.RequestTimeout <= 0 {
		bad("cluster.requestTimeout", "must be > 0, got %v", c.Cluster.RequestTimeout)
	}
	if c.Cluster.MaxWriteBatch <= 0 {
		bad("cluster.maxWriteBatch", "must be > 0, got %d", c.Cluster.MaxWriteBatch)
	}
	if c.Cluster.HealthCheckInterval <= 0 {
		bad("cluster.healthCheckInterval", "must be > 0, got %v", c.Cluster.HealthCheckInterval)
	}
	if c.Cluster.HealthCheckTimeout <= 0 {
		bad("cluster.healthCheckTimeout", "must be > 0, got %v", c.Cluster.HealthCheckTimeout)
	}
	if c.Cluster.HealthCheckFailures <= 0 {
		bad("cluster.healthCheckFailures", "must be > 0, got %d", c.Cluster.HealthCheckFailures)
	}
	for i, e := range c.Etcd.Endpoints {
		checkAddr(fmt.Sprintf("etcd.endpoints[%d]", i), e)
	}
	if c.Etcd.Embedded.Enabled {
		for _, u := range []struct{ f, v string }{
			{"etcd.embedded.clientURL", c.Etcd.Embedded.ClientURL},
			{"etcd.embedded.peerURL", c.Etcd.Embedded.PeerURL},
		} {
			if p, err := url.Parse(u.v); err != nil || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https") {
				bad(u.f, "%q is not an http(s)://host:port URL", u.v)
			}
		}
		switch c.Etcd.Embedded.InitialClusterState {
		case "new", "existing":
		default:
			bad("etcd.embedded.initialClusterState", "must be new or existing, got %q", c.Etcd.Embedded.InitialClusterState)
		}
		for _, m := range strings.Split(c.Etcd.Embedded.InitialCluster, ",") {
			if !strings.Contains(m, "=") {
				bad("etcd.embedded.initialCluster", "member %q is not name=peerURL", m)
			}
		}
	}
	c.Limits.validate(bad)
	if c.Bootstrap.MaxBytesPerSecond < 0 {
		bad("bootstrap.maxBytesPerSecond", "must be >= 0, got %d", c.Bootstrap.MaxBytesPerSecond)
	}
	if c.Bootstrap.Workers <= 0 {
		bad("bootstrap.workers", "must be > 0, got %d", c.Bootstrap.Workers)
	}
	if c.Bootstrap.ShardsPerFetch <= 0 {
		bad("bootstrap.shardsPerFetch", "must be > 0, got %d", c.Bootstrap.ShardsPerFetch)
	}
	if c.Bootstrap.MarkAvailableAttempts <= 0 {
		bad("bootstrap.markAvailableAttempts", "must be > 0, got %d", c.Bootstrap.MarkAvailableAttempts)
	}
	if r := c.Bootstrap.Restore; r.Enabled() && (r.BucketConfigFile == "" || r.Backup == "") {
		bad("bootstrap.restore", "set both bucketConfigFile and backup (or neither)")
	}
	if c.Bootstrap.CatchUpAfter <= 0 {
		bad("bootstrap.catchUpAfter", "must be > 0, got %v", c.Bootstrap.CatchUpAfter)
	}
	if c.Bootstrap.MarkAvailableBackoff <= 0 {
		bad("bootstrap.markAvailableBackoff", "must be > 0, got %v", c.Bootstrap.MarkAvailableBackoff)
	}
	if c.Hints.MaxBytesPerTarget <= 0 {
		bad("hints.maxBytesPerTarget", "must be > 0, got %d", c.Hints.MaxBytesPerTarget)
	}
	if c.Hints.MaxAge <= 0 {
		bad("hints.maxAge", "must be > 0, got %v", c.Hints.MaxAge)
	}
	if c.Hints.ReplayBytesPerSecond < 0 {
		bad("hints.replayBytesPerSecond", "must be >= 0, got %d", c.Hints.ReplayBytesPerSecond)
	}
	c.validateSecurity(bad)
	if c.Ingest.MetadataMaxMetrics < 0 {
		bad("ingest.metadataMaxMetrics", "must be positive, got %d", c.Ingest.MetadataMaxMetrics)
	}
	if c.Ingest.MaxExemplars < 0 {
		bad("ingest.maxExemplars", "must be positive, got %d", c.Ingest.MaxExemplars)
	}
	if c.Ingest.SnapshotInterval < 0 {
		bad("ingest.snapshotInterval", "must be positive, got %v", c.Ingest.SnapshotInterval)
	}
	if m := c.Limits.MaxSeriesPerFetch; m > 0 && c.Repair.SeriesPerFetch > m {
		// Every node runs one config: a repair pull this node's peers
		// refuse would fail every pass.
		bad("repair.seriesPerFetch", "must be at most limits.maxSeriesPerFetch=%d, got %d", m, c.Repair.SeriesPerFetch)
	}
	errs = append(errs, c.Repair.validate()...)
	errs = append(errs, c.GC.validate()...)
	return errors.Join(errs...)
}

// validate checks the limits: a count is -1 (off) or positive, and the
// label lengths stay within what PromQL can read back.
func (l *Limits) validate(bad func(field, format string, args ...any)) {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"limits.maxLabelNameLength", l.MaxLabelNameLength},
		{"limits.maxLabelValueLength", l.MaxLabelValueLength},
		{"limits.maxLabelNamesPerSeries", l.MaxLabelNamesPerSeries},
		{"limits.maxSeriesPerRequest", l.MaxSeriesPerRequest},
		{"limits.maxSamplesPerRequest", l.MaxSamplesPerRequest},
		{"limits.maxActiveSeries", l.MaxActiveSeries},
		{"limits.maxFetchedSeriesPerQuery", l.MaxFetchedSeriesPerQuery},
		{"limits.maxSeriesPerFetch", l.MaxSeriesPerFetch},
		{"limits.maxMetadataLength", l.MaxMetadataLength},
	} {
		if f.v < -1 {
			bad(f.name, "must be positive, or -1 for no limit, got %d", f.v)
		}
	}
	// Prometheus' label sets store a string's length in 3 bytes: a longer
	// name or value is stored but breaks every PromQL and series query.
	const maxRepresentable = 1<<24 - 1
	for _, f := range []struct {
		name string
		v    int
	}{
		{"limits.maxLabelNameLength", l.MaxLabelNameLength},
		{"limits.maxLabelValueLength", l.MaxLabelValueLength},
	} {
		if f.v == -1 || f.v > maxRepresentable {
			bad(f.name, "must be in 1..%d (the longest label PromQL can read back), got %d", maxRepresentable, f.v)
		}
	}
}
