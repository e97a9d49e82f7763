package promapi

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// copiedFromPrometheus is the Prometheus module version whose promql
// functions the evaluator's arithmetic copies (fasteval.go:
// extrapolatedRate, instantRate, the *_over_time functions' Kahan sums and
// incremental mean, vectorSelectorSingle's lookback; fastbinop.go: the
// operators and resultMetric's labels; the aggregation's grouping key and
// order). Re-check those against the new version's promql/functions.go
// and engine.go, then change this constant.
const copiedFromPrometheus = "v0.316.0"

// TestCopiedArithmeticMatchesPrometheusVersion fails when go.mod moves
// Prometheus to another version, until someone re-checks the copied
// arithmetic against it (the generative test checks behaviour only where
// its cases reach).
func TestCopiedArithmeticMatchesPrometheusVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*github\.com/prometheus/prometheus (\S+)`).FindSubmatch(mod)
	require.NotNil(t, m, "go.mod requires github.com/prometheus/prometheus")
	require.Equal(t, copiedFromPrometheus, string(m[1]),
		"Prometheus changed version: re-check the arithmetic fasteval.go and fastbinop.go copy from promql, then update copiedFromPrometheus")
}
