package promapi

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/query"
)

// defaultQuery is the query section of the node's default config.
var defaultQuery = config.Default().Query

// testOptions is o with the bounds the node fills from its config's query
// section taken from config.Default() where o leaves them zero: the
// default values are written once, in config.Defaults.
func testOptions(o Options) Options {
	d := config.Default()
	q := defaultQuery
	if o.Namespace == "" {
		o.Namespace = d.Namespaces[0].Name
	}
	if o.Timeout == 0 {
		o.Timeout = q.Timeout
	}
	if o.MaxSamples == 0 {
		o.MaxSamples = q.MaxSamples
	}
	if o.MaxExpressionBytes == 0 {
		o.MaxExpressionBytes = q.MaxExpressionBytes
	}
	if o.MaxExpressionDepth == 0 {
		o.MaxExpressionDepth = q.MaxExpressionDepth
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = q.MaxConcurrency
	}
	if o.LookbackDelta == 0 {
		o.LookbackDelta = q.LookbackDelta
	}
	if o.EvaluationInterval == 0 {
		o.EvaluationInterval = q.EvaluationInterval
	}
	if o.Parallelism == 0 {
		o.Parallelism = q.Parallelism
	}
	return o
}

// newAPI is New(b, testOptions(o)), failing tb on an error.
func newAPI(tb testing.TB, b query.Reader, o Options) *API {
	tb.Helper()
	a, err := New(b, testOptions(o))
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// Bounds the node always fills from its config are refused when zero,
// each named, instead of defaulted here.
func TestNewRefusesZeroBounds(t *testing.T) {
	_, err := New(&memBackend{}, Options{})
	for _, f := range []string{"Namespace", "Timeout", "MaxSamples", "MaxConcurrency", "LookbackDelta", "EvaluationInterval", "MaxExpressionBytes", "MaxExpressionDepth"} {
		require.ErrorContains(t, err, f)
	}
	_, err = New(&memBackend{}, testOptions(Options{MaxExpressionBytes: -1, MaxExpressionDepth: -1}))
	require.NoError(t, err, "-1 is no bound")
	_, err = Evaluate(t.Context(), &memBackend{}, &query.Request{}, Options{})
	require.ErrorContains(t, err, "MaxSamples")
}
