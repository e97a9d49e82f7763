// Package integration holds multi-node tests: real nodes (in-process, on
// loopback ports) with a real embedded etcd, talking node RPC to each
// other, fed through Prometheus remote write and read over HTTP.
package integration
