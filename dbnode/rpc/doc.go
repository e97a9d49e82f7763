// Package rpc is node RPC: the gRPC service through which the client
// session of any node writes to and reads from the owners of a shard.
//
// There is no protoc here: the service descriptor (service.go) is written by
// hand the way generated code would be, and messages carry their own compact
// binary form (uvarints, zigzag varints, length-prefixed bytes, float64
// bits little-endian) through the gRPC codec "tessera", described byte by
// byte in docs/format/rpc.md. Series data travels as dbnode/encoding
// streams, never as raw samples.
//
//	client session ──Client──gRPC/HTTP2──▶ Server ──▶ Ownership.CheckShard
//	                                         │
//	                                         └──▶ Database (storage.Database)
//
// The server refuses a request that touches a shard its Ownership does not
// allow with FailedPrecondition, before doing anything; the status codes it
// returns, and what a caller should do about each, are listed on Error.
package rpc
