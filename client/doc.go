// Package client is the cluster session: it routes writes and reads of
// series to the owners of their shards by the cached placement, batches
// them per host, and decides success by consistency level (quorum.go is
// the one place that does).
package client
