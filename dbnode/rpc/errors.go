package rpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RefusedShardsKey is the trailer metadata key listing, comma separated,
// every shard a FailedPrecondition refusal names (the message lists only
// the first few).
const RefusedShardsKey = "tessera-refused-shards"

// maxNamedShards is how many refused shards the error message spells out.
const maxNamedShards = 3

// refusal is one shard the node will not serve, and why.
type refusal struct {
	shard  uint32
	reason error
}

// refusedMessage formats "shard 17: not owned by node2; shard 18: ...; and
// 4 more shards" so that one line tells an operator what went wrong.
func refusedMessage(op Op, refused []refusal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s refused: ", op)
	for i, r := range refused {
		if i == maxNamedShards {
			fmt.Fprintf(&b, "; and %d more shards", len(refused)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "shard %d: %v", r.shard, r.reason)
	}
	return b.String()
}

func refusedShardsValue(refused []refusal) string {
	b := make([]byte, 0, 6*len(refused))
	for i, r := range refused {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(r.shard), 10)
	}
	return string(b)
}

func parseRefusedShards(v string) []uint32 {
	var out []uint32
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.ParseUint(f, 10, 32); err == nil {
			out = append(out, uint32(n))
		}
	}
	return out
}

// storageStatus maps an error of the storage engine to the status the
// client's retry logic expects.
func storageStatus(what string, err error) error {
	code := codes.Unavailable // transient: commit log full or failing, I/O
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, storage.ErrUnknownNamespace), errors.Is(err, ident.ErrMalformedID):
		code = codes.InvalidArgument
	case errors.Is(err, encoding.ErrCorrupt), errors.As(err, new(*storage.PartialError)):
		code = codes.DataLoss // another replica may hold good data
	}
	return status.Errorf(code, "%s: %v", what, err)
}

// ctxStatus is the status of a request whose context ended.
func ctxStatus(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Canceled, err.Error())
}

// Error is a failed call as the Client returns it: which node, which
// method, and the gRPC status (status.Code and status.FromError see it
// through GRPCStatus).
//
// Codes, and what a caller should do with them:
//
//	FailedPrecondition  the node does not serve a shard (Shards lists them): refresh topology, do not retry here
//	InvalidArgument     bad request (unknown namespace, bad matcher, wrong shard for an ID): never retry
//	ResourceExhausted   message larger than the size limit: narrow the request
//	Unavailable         transient (node down, storage busy or failing): retry, here or on another replica
//	DeadlineExceeded    timed out: retry elsewhere or later (writes are idempotent)
//	DataLoss            corrupt data on the node: read another replica
//	Canceled            the caller gave up
type Error struct {
	Addr   string
	Method string
	Status *status.Status
	// Shards are all the shards a FailedPrecondition refusal named.
	Shards []uint32
}

func (e *Error) Error() string {
	return fmt.Sprintf("node %s: %s: %s: %s", e.Addr, e.Method, e.Status.Code(), e.Status.Message())
}

// GRPCStatus lets status.Code and status.FromError read the code.
func (e *Error) GRPCStatus() *status.Status { return e.Status }

// Code is the gRPC code of err (codes.OK for nil, codes.Unknown for errors
// that carry none).
func Code(err error) codes.Code { return status.Code(err) }
