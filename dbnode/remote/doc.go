// Package remote speaks Prometheus remote write (1.0 and 2.0) and remote
// read on the wire: it decodes write requests straight into series IDs,
// samples, metadata and exemplars, and encodes read responses.
//
// The write decoder is hand-written instead of prompb's generated
// Unmarshal because ingest is the hottest path of the node: it reads the
// protobuf in place, builds each series' canonical ID (package ident) into
// one arena, and allocates nothing per series or per sample once its
// buffers have grown. prompb and the io.prometheus.write.v2 types are
// still what the tests use to build requests, so the two are checked
// against each other.
package remote
