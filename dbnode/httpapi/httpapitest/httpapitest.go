// Package httpapitest builds the node's HTTP API for tests of other
// packages, with the options a node fills from its config taken from
// config.Default(): the default values are written once, in
// config.Defaults. (httpapi's own tests, which cannot import this
// package, have the same helper in options_test.go.)
package httpapitest

import (
	"testing"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
)

// Options is o with every field the node fills from its config taken
// from config.Default() where o leaves it zero.
func Options(o httpapi.Options) httpapi.Options {
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

// New is httpapi.New(Options(o)), failing tb on an error.
func New(tb testing.TB, o httpapi.Options) *httpapi.API {
	tb.Helper()
	a, err := httpapi.New(Options(o))
	if err != nil {
		tb.Fatalf("httpapi: %v", err)
	}
	return a
}
