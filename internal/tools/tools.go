//go:build tools

// Package tools pins modules the packages are built from before every
// package imports them, so `go mod tidy -e` keeps them.
package tools

import (
	_ "github.com/RoaringBitmap/roaring/v2"
	_ "github.com/golang/snappy"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/prometheus/prometheus/model/labels"
	_ "github.com/prometheus/prometheus/prompb"
	_ "github.com/prometheus/prometheus/promql"
	_ "github.com/prometheus/prometheus/storage"
	_ "github.com/prometheus/prometheus/tsdb/chunkenc"
	_ "github.com/prometheus/prometheus/promql/parser"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "github.com/twmb/murmur3"
	_ "github.com/uber-go/tally/v4"
	_ "github.com/uber-go/tally/v4/prometheus"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.uber.org/goleak"
	_ "google.golang.org/grpc"
	_ "gopkg.in/yaml.v3"
	_ "pgregory.net/rapid"
)
