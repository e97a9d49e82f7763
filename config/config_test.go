package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEmptyConfigIsDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader(""))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7201", c.HTTP.Listen)
	require.Equal(t, "sync", c.CommitLog.Mode)
	require.Len(t, c.Namespaces, 1)
	ns := c.Namespaces[0]
	require.Equal(t, 48*time.Hour, ns.Retention)
	require.Equal(t, 2*time.Hour, ns.BlockSize)
	require.Equal(t, 10*time.Minute, ns.BufferPast)
	require.Equal(t, 2*time.Minute, ns.BufferFuture)
	require.True(t, ns.ColdWritesEnabled())
	require.Equal(t, []string{"127.0.0.1:2379"}, c.Etcd.Endpoints)
	require.Equal(t, 4, c.Bootstrap.Workers)
	require.Equal(t, 64, c.Bootstrap.ShardsPerFetch)
	require.Equal(t, 5, c.Bootstrap.MarkAvailableAttempts)
	require.Equal(t, 200*time.Millisecond, c.Bootstrap.MarkAvailableBackoff)
	require.True(t, *c.Hints.Enabled)
	require.True(t, c.Storage.RestartSnapshot.On())
	require.Equal(t, time.Minute, c.Storage.RestartSnapshot.Every)
	require.Equal(t, int64(64<<20), c.Storage.RestartSnapshot.LogBytes)
	require.Equal(t, int64(1<<30), c.Hints.MaxBytesPerTarget)
	require.Equal(t, 3*time.Hour, c.Hints.MaxAge)
	require.Equal(t, int64(8<<20), c.Hints.ReplayBytesPerSecond)
}

// The defaults httpapi, promapi, storage and the commit log wrote for
// themselves until they moved here, with the values they had: the node
// passes these, and those packages refuse a zero.
func TestPackageDefaultsAreHere(t *testing.T) {
	c := Default()
	require.Equal(t, int64(32<<20), c.HTTP.MaxBodyBytes)
	require.Equal(t, 1<<20, c.HTTP.SeriesCacheSize)
	require.Equal(t, 10000, c.Ingest.MetadataMaxMetrics)
	require.Equal(t, 100000, c.Ingest.MaxExemplars)
	require.Equal(t, 4096, c.Cluster.NumShards)
	require.Equal(t, time.Second, c.CommitLog.FlushEvery)
	require.Equal(t, int64(256<<20), c.CommitLog.MaxFileSize)
	require.Equal(t, int64(64<<20), c.CommitLog.MaxPendingBytes)
	q := c.Query
	require.Equal(t, 2*time.Minute, q.Timeout)
	require.Equal(t, 50_000_000, q.MaxSamples)
	require.Equal(t, 20, q.MaxConcurrency)
	require.Equal(t, 5*time.Minute, q.LookbackDelta)
	require.Equal(t, time.Minute, q.EvaluationInterval)
	require.Equal(t, 64<<10, q.MaxExpressionBytes)
	require.Equal(t, 1000, q.MaxExpressionDepth)
	require.Equal(t, "default", c.Namespaces[0].Name)
}

func TestDefaultIsEmbeddedSeed(t *testing.T) {
	c := Default()
	require.NoError(t, c.Validate())
	require.True(t, c.Etcd.Embedded.Enabled)
	require.True(t, c.Cluster.AutoInit)
}

func TestParseOverrides(t *testing.T) {
	c, err := Parse(strings.NewReader(`
id: n2
commitlog:
  mode: async
  flushEvery: 250ms
storage:
  tickInterval: 2s
namespaces:
  - name: metrics
    blockSize: 1h
    coldWrites: false
query:
  parallelism: 3
  fastPath: false
  maxExpressionDepth: -1
`))
	require.NoError(t, err)
	require.Equal(t, 3, c.Query.Parallelism)
	require.Equal(t, -1, c.Query.MaxExpressionDepth, "-1: no limit")
	require.Equal(t, 64<<10, c.Query.MaxExpressionBytes)
	require.False(t, c.Query.FastPathEnabled())
	require.False(t, c.Query.PushdownEnabled(), "the pushdown is the fast path's evaluator")
	require.Equal(t, "n2", c.ID)
	require.Equal(t, 250*time.Millisecond, c.CommitLog.FlushEvery)
	require.Equal(t, 2*time.Second, c.Storage.TickInterval)
	require.Equal(t, time.Hour, c.Namespaces[0].BlockSize)
	require.False(t, c.Namespaces[0].ColdWritesEnabled())
	require.Equal(t, 48*time.Hour, c.Namespaces[0].Retention)
}

func TestErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"bogus: 1", "bogus: unknown field"},
		{"http:\n  listn: x", "http.listn: unknown field"},
		{"commitlog:\n  mode: sometimes", "commitlog.mode"},
		{"http:\n  listen: nope", "http.listen"},
		{"http:\n  seriesCacheSize: -1", "http.seriesCacheSize"},
		{"ingest:\n  metadataMaxMetrics: -1", "ingest.metadataMaxMetrics"},
		{"ingest:\n  maxExemplars: -1", "ingest.maxExemplars"},
		{"namespaces:\n  - name: a\n    blockSize: 90s", "namespaces[0].blockSize"},
		{"namespaces:\n  - name: a\n    retention: 1h", "namespaces[0].retention"},
		{"namespaces:\n  - name: a\n  - name: a", "namespaces[1].name"},
		{"cluster:\n  writeConsistency: most", "cluster.writeConsistency"},
		{"commitlog:\n  flushEvery: soon", "flushEvery"},
		{"storage:\n  tickInterval: 1ms", "storage.tickInterval"},
		{"etcd:\n  endpoints: [\"x\"]", "etcd.endpoints[0]"},
		{"bootstrap:\n  workers: -1", "bootstrap.workers"},
		{"bootstrap:\n  shardsPerFetch: -2", "bootstrap.shardsPerFetch"},
		{"bootstrap:\n  markAvailableAttempts: -1", "bootstrap.markAvailableAttempts"},
		{"bootstrap:\n  markAvailableBackoff: -1s", "bootstrap.markAvailableBackoff"},
		{"bootstrap:\n  maxBytesPerSecond: -1", "bootstrap.maxBytesPerSecond"},
		{"hints:\n  maxBytesPerTarget: -1", "hints.maxBytesPerTarget"},
		{"hints:\n  maxAge: -1s", "hints.maxAge"},
		{"hints:\n  replayBytesPerSecond: -1", "hints.replayBytesPerSecond"},
		{"hints:\n  enabled: maybe", "enabled"},
		{"gc:\n  percent: -5", "gc.percent"},
		{"gc:\n  minPercent: 200", "gc.minPercent"},
		{"gc:\n  headroom: -1", "gc.headroom"},
		{"query:\n  parallelism: -1", "query.parallelism"},
		{"query:\n  maxConcurrency: -1", "query.maxConcurrency"},
		{"query:\n  lookbackDelta: -1m", "query.lookbackDelta"},
		{"query:\n  evaluationInterval: -1m", "query.evaluationInterval"},
	} {
		_, err := Parse(strings.NewReader(tc.yaml))
		require.Error(t, err, tc.yaml)
		require.Contains(t, err.Error(), tc.want, tc.yaml)
	}
}

func TestLimitsDefaultsAndValidation(t *testing.T) {
	c, err := Parse(strings.NewReader(""))
	require.NoError(t, err)
	require.Equal(t, Limits{
		MaxLabelNameLength: 1024, MaxLabelValueLength: 2048, MaxLabelNamesPerSeries: 64,
		MaxSeriesPerRequest: 200_000, MaxSamplesPerRequest: 1_000_000, MaxActiveSeries: 1_000_000,
		MaxFetchedSeriesPerQuery: 1_000_000, MaxQueryLength: 721 * time.Hour,
		MaxSeriesPerFetch: 10_000, MaxMetadataLength: 1024,
	}, c.Limits)
	require.Equal(t, 1000, c.Query.MaxExpressionDepth)

	c, err = Parse(strings.NewReader("limits:\n  maxActiveSeries: -1\n  maxQueryLength: -1s\n  maxQueryLookback: 720h\n  maxLabelValueLength: 4096\n"))
	require.NoError(t, err)
	require.Equal(t, -1, c.Limits.MaxActiveSeries, "-1: no limit")
	require.Equal(t, -time.Second, c.Limits.MaxQueryLength, "negative: no limit")
	require.Equal(t, 720*time.Hour, c.Limits.MaxQueryLookback)
	require.Equal(t, 4096, c.Limits.MaxLabelValueLength)

	for _, tc := range []struct{ yaml, want string }{
		{"limits:\n  maxActiveSeries: -2", "limits.maxActiveSeries: must be positive, or -1 for no limit"},
		{"limits:\n  maxSeriesPerRequest: -5", "limits.maxSeriesPerRequest"},
		{"limits:\n  maxLabelValueLength: 16777216", "limits.maxLabelValueLength: must be in 1..16777215"},
		{"limits:\n  maxLabelNameLength: -1", "limits.maxLabelNameLength: must be in 1..16777215"},
		{"limits:\n  maxLabelNames: 3", "limits.maxLabelNames: unknown field"},
		{"query:\n  maxExpressionBytes: -2", "query.maxExpressionBytes: must be positive, or -1 for no limit"},
		{"query:\n  maxExpressionDepth: -3", "query.maxExpressionDepth: must be positive, or -1 for no limit"},
	} {
		_, err := Parse(strings.NewReader(tc.yaml))
		require.Error(t, err, tc.yaml)
		require.Contains(t, err.Error(), tc.want, tc.yaml)
	}
}

// A seed joining a running etcd cluster after `tessera etcd add-member`
// says initialClusterState: existing; anything but new or existing is
// refused by name.
func TestEmbeddedEtcdInitialClusterState(t *testing.T) {
	c, err := Parse(strings.NewReader("etcd:\n  embedded:\n    enabled: true\n"))
	require.NoError(t, err)
	require.Equal(t, "new", c.Etcd.Embedded.InitialClusterState)
	c, err = Parse(strings.NewReader("etcd:\n  embedded:\n    enabled: true\n    initialClusterState: existing\n"))
	require.NoError(t, err)
	require.Equal(t, "existing", c.Etcd.Embedded.InitialClusterState)
	_, err = Parse(strings.NewReader("etcd:\n  embedded:\n    enabled: true\n    initialClusterState: join\n"))
	require.ErrorContains(t, err, "etcd.embedded.initialClusterState")
}
