package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDurationForms(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d":     7 * 24 * time.Hour,
		"30d":    30 * 24 * time.Hour,
		"2w":     14 * 24 * time.Hour,
		"1y":     365 * 24 * time.Hour,
		"1d12h":  36 * time.Hour,
		"1h30m":  90 * time.Minute,
		"100ms":  100 * time.Millisecond,
		"1.5h":   90 * time.Minute,
		"90s":    90 * time.Second,
		"250us":  250 * time.Microsecond,
		"-1s":    -time.Second, // Validate refuses it where negatives make no sense
		"0":      0,
		" 48h ":  48 * time.Hour,
		"2h0m0s": 2 * time.Hour,
	} {
		got, err := ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, want := range map[string]string{
		"48":   "48 has no unit: write 48s, 48m, 48h or 48d",
		"1.5":  "1.5 has no unit",
		"soon": `"soon" is not a duration`,
		"7x":   `"7x" is not a duration`,
		"":     "empty duration",
	} {
		_, err := ParseDuration(in)
		require.Error(t, err, in)
		require.Contains(t, err.Error(), want, in)
		require.Contains(t, err.Error(), "7d", "the error lists the units: %s", in)
	}
}

// Every duration field of the config takes Prometheus' and Go's forms, in
// every YAML scalar style, and the rest of the document decodes as before.
func TestConfigDurationsAcceptPrometheusUnits(t *testing.T) {
	c, err := Parse(strings.NewReader(`
commitlog:
  mode: async
  flushEvery: 100ms
storage:
  tickInterval: "1m"
namespaces:
  - name: week
    retention: 7d
    blockSize: 2h
    bufferPast: '1h30m'
  - name: year
    retention: 1y
    blockSize: 1d
  - {name: fortnight, retention: 2w, blockSize: 1d12h, bufferFuture: 5m}
query:
  timeout: 30s
cluster:
  hedgeAfter: 250ms
etcd:
  dialTimeout: 1m
`))
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, c.CommitLog.FlushEvery)
	require.Equal(t, time.Minute, c.Storage.TickInterval)
	require.Equal(t, 7*24*time.Hour, c.Namespaces[0].Retention)
	require.Equal(t, 90*time.Minute, c.Namespaces[0].BufferPast)
	require.Equal(t, 365*24*time.Hour, c.Namespaces[1].Retention)
	require.Equal(t, 24*time.Hour, c.Namespaces[1].BlockSize)
	require.Equal(t, 14*24*time.Hour, c.Namespaces[2].Retention)
	require.Equal(t, 36*time.Hour, c.Namespaces[2].BlockSize)
	require.Equal(t, 5*time.Minute, c.Namespaces[2].BufferFuture)
	require.Equal(t, 30*time.Second, c.Query.Timeout)
	require.Equal(t, 250*time.Millisecond, c.Cluster.HedgeAfter)
	require.Equal(t, time.Minute, c.Etcd.DialTimeout)
}

func TestConfigDurationErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"namespaces:\n  - name: a\n    retention: 48", "namespaces[0].retention: 48 has no unit: write 48s, 48m, 48h or 48d"},
		{"namespaces:\n  - name: a\n  - name: b\n    blockSize: 2", "namespaces[1].blockSize: 2 has no unit"},
		{"storage:\n  tickInterval: 10", "storage.tickInterval: 10 has no unit"},
		{"cluster:\n  hedgeAfter: fast", `cluster.hedgeAfter: "fast" is not a duration`},
		{"commitlog:\n  flushEvery: 1.5", "commitlog.flushEvery: 1.5 has no unit"},
	} {
		_, err := Parse(strings.NewReader(tc.yaml))
		require.Error(t, err, tc.yaml)
		require.Contains(t, err.Error(), tc.want, tc.yaml)
		require.NotContains(t, err.Error(), "cannot unmarshal", tc.yaml)
	}
	// Shape errors are still yaml's, with the line quoted.
	_, err := Parse(strings.NewReader("storage:\n  tickInterval: [1s]"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "tickInterval")
}

// FuzzParse: no config document makes Parse panic, durations included.
func FuzzParse(f *testing.F) {
	f.Add("namespaces:\n  - name: a\n    retention: 7d\n")
	f.Add("storage: {tickInterval: '1m'}\n")
	f.Add("cluster:\n  hedgeAfter: 48\n")
	f.Add("a: &x 1d\nstorage:\n  tickInterval: *x\n")
	f.Fuzz(func(t *testing.T, doc string) {
		_, _ = Parse(strings.NewReader(doc))
	})
}
