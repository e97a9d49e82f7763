package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRollupChainParses(t *testing.T) {
	c, err := Parse(strings.NewReader(`
namespaces:
  - name: default
    retention: 15d
  - name: r5m
    rollupOf: default
    resolution: 5m
    retention: 90d
    blockSize: 1d
    bufferPast: 1h
  - name: r1h
    rollupOf: r5m
    resolution: 1h
    retention: 2y
    blockSize: 1d
    bufferPast: 1h
`))
	require.NoError(t, err)
	require.False(t, c.Namespaces[0].IsRollup())
	require.Equal(t, "default", c.Namespaces[1].RollupOf)
	require.Equal(t, 5*time.Minute, c.Namespaces[1].Resolution)
	require.Equal(t, 730*24*time.Hour, c.Namespaces[2].Retention)
	require.Equal(t, time.Hour, c.Namespaces[2].Resolution)
}

// Each bad rollup is refused with the key at fault named by its path.
func TestRollupErrorsNameTheKey(t *testing.T) {
	const raw = "namespaces:\n  - name: default\n    retention: 15d\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"resolution does not divide own blockSize", raw +
			"  - name: r\n    rollupOf: default\n    resolution: 7m\n    retention: 90d\n",
			"namespaces[1].resolution: 7m0s does not divide blockSize 2h0m0s"},
		{"resolution does not divide source blockSize", "namespaces:\n  - name: default\n    retention: 15d\n    blockSize: 1h\n" +
			"  - name: r\n    rollupOf: default\n    resolution: 40m\n    retention: 90d\n    blockSize: 2h\n",
			`namespaces[1].resolution: 40m0s does not divide blockSize 1h0m0s of its source "default"`},
		{"unknown source", raw +
			"  - name: r\n    rollupOf: raw\n    resolution: 5m\n    retention: 90d\n",
			`namespaces[1].rollupOf: "raw" is not a namespace defined here`},
		{"rollup of itself", raw +
			"  - name: r\n    rollupOf: r\n    resolution: 5m\n    retention: 90d\n",
			`namespaces[1].rollupOf: "r" is a rollup of itself`},
		{"cycle", raw +
			"  - name: a\n    rollupOf: b\n    resolution: 5m\n    retention: 90d\n" +
			"  - name: b\n    rollupOf: a\n    resolution: 10m\n    retention: 90d\n",
			"namespaces[1].rollupOf: rollup chain loops: a -> b -> a"},
		{"retention shorter than source", raw +
			"  - name: r\n    rollupOf: default\n    resolution: 5m\n    retention: 7d\n",
			`namespaces[1].retention: 168h0m0s is shorter than the retention 360h0m0s of its source "default"`},
		{"not coarser than source", raw +
			"  - name: a\n    rollupOf: default\n    resolution: 5m\n    retention: 90d\n" +
			"  - name: b\n    rollupOf: a\n    resolution: 5m\n    retention: 1y\n",
			`namespaces[2].resolution: 5m0s is not coarser than the resolution 5m0s of its source "a"`},
		{"windows do not nest", raw +
			"  - name: a\n    rollupOf: default\n    resolution: 8m\n    retention: 90d\n" +
			"  - name: b\n    rollupOf: a\n    resolution: 20m\n    retention: 1y\n",
			`namespaces[2].resolution: 20m0s is not a multiple of the resolution 8m0s of its source "a"`},
		{"missing resolution", raw +
			"  - name: r\n    rollupOf: default\n    retention: 90d\n",
			"namespaces[1].resolution: a rollup needs a whole number of seconds >= 1s, got 0s"},
		{"sub-second resolution", raw +
			"  - name: r\n    rollupOf: default\n    resolution: 1500ms\n    retention: 90d\n",
			"namespaces[1].resolution: a rollup needs a whole number of seconds"},
		{"resolution without rollupOf", raw +
			"  - name: r\n    resolution: 5m\n",
			"namespaces[1].resolution: 5m0s is set but rollupOf is not"},
		{"first namespace is a rollup", "namespaces:\n  - name: r\n    rollupOf: default\n    resolution: 5m\n    retention: 90d\n  - name: default\n",
			"namespaces[0].rollupOf: the first namespace receives writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.yaml))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
