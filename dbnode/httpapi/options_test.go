package httpapi

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
)

// testOptions is o with the fields the node fills from its config taken
// from config.Default() where o leaves them zero: the default values are
// written once, in config.Defaults, and tests use them from there.
func testOptions(o Options) Options {
	d := config.Default()
	if o.Namespace == "" {
		o.Namespace = d.Namespaces[0].Name
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = d.HTTP.MaxBodyBytes
	}
	if o.NumShards == 0 {
		o.NumShards = uint32(d.Cluster.NumShards)
	}
	if o.SeriesCacheSize == 0 {
		o.SeriesCacheSize = d.HTTP.SeriesCacheSize
	}
	if o.MetadataMaxMetrics == 0 {
		o.MetadataMaxMetrics = d.Ingest.MetadataMaxMetrics
	}
	if o.MaxExemplars == 0 {
		o.MaxExemplars = d.Ingest.MaxExemplars
	}
	return o
}

// newAPI is New(testOptions(o)), failing tb on an error.
func newAPI(tb testing.TB, o Options) *API {
	tb.Helper()
	a, err := New(testOptions(o))
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// testState is a State a test moves by hand, as the node's lifecycle does.
type testState struct {
	mu      sync.Mutex
	backend Backend
	ready   func() (string, any)
	damage  []string
}

func newTestState(reason string) *testState {
	s := &testState{}
	s.setReason(reason)
	return s
}

func (s *testState) Backend() Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backend
}

func (s *testState) Ready() (string, any) {
	s.mu.Lock()
	f := s.ready
	s.mu.Unlock()
	return f()
}

func (s *testState) Damage() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.damage
}

func (s *testState) serve(b Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backend = b
}

func (s *testState) setReason(msg string) {
	s.setReadyFunc(func() (string, any) { return msg, nil })
}

func (s *testState) setReadyFunc(f func() (string, any)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = f
}

func (s *testState) setDamage(lines []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.damage = lines
}

// Options left zero where the node always passes a config value are
// refused by New, naming the field, instead of filled by this package.
func TestNewRefusesZeroSizes(t *testing.T) {
	_, err := New(Options{Namespace: "default"})
	for _, f := range []string{"MaxBodyBytes", "NumShards", "SeriesCacheSize", "MetadataMaxMetrics", "MaxExemplars"} {
		require.ErrorContains(t, err, f)
	}
	_, err = New(testOptions(Options{}))
	require.NoError(t, err)
	_, err = New(testOptions(Options{Backend: Local{}, State: newTestState("")}))
	require.ErrorContains(t, err, "Backend and State")
}
