package rpc

import (
	"context"

	"google.golang.org/grpc"
)

// ServiceName is the gRPC service of node RPC; methods are
// /tessera.rpc.v1.Node/{WriteBatch,FetchTagged,Fetch,Health} and, for peer
// bootstrap, {BlockMetadata,FetchBlock,FetchUnflushed}.
const ServiceName = "tessera.rpc.v1.Node"

const (
	methodWriteBatch  = "/" + ServiceName + "/WriteBatch"
	methodFetchTagged = "/" + ServiceName + "/FetchTagged"
	methodFetch       = "/" + ServiceName + "/Fetch"
	methodHealth      = "/" + ServiceName + "/Health"

	methodBlockMetadata  = "/" + ServiceName + "/BlockMetadata"
	methodFetchBlock     = "/" + ServiceName + "/FetchBlock"
	methodFetchUnflushed = "/" + ServiceName + "/FetchUnflushed"
)

// nodeService is what the service descriptor dispatches to (the role of a
// generated XxxServer interface).
type nodeService interface {
	WriteBatch(context.Context, *WriteRequest) (*WriteResponse, error)
	FetchTagged(context.Context, *FetchTaggedRequest) (*FetchResponse, error)
	Fetch(context.Context, *FetchRequest) (*FetchResponse, error)
	Health(context.Context, *HealthRequest) (*HealthResponse, error)
	BlockMetadata(context.Context, *BlockMetadataRequest) (*BlockMetadataResponse, error)
	FetchBlock(context.Context, *FetchBlockRequest) (*FetchBlockResponse, error)
	FetchUnflushed(context.Context, *FetchUnflushedRequest) (*FetchUnflushedResponse, error)
}

// unaryHandler builds a method handler the way protoc-gen-go-grpc would:
// decode the request with the call's codec, then call the method, through
// the server's interceptor if there is one.
func unaryHandler[Req any, Resp any](name string, call func(nodeService, context.Context, *Req) (*Resp, error)) grpc.MethodDesc {
	full := "/" + ServiceName + "/" + name
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(Req)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return call(srv.(nodeService), ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: full}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return call(srv.(nodeService), ctx, req.(*Req))
			})
		},
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*nodeService)(nil),
	Methods: []grpc.MethodDesc{
		unaryHandler("WriteBatch", nodeService.WriteBatch),
		unaryHandler("FetchTagged", nodeService.FetchTagged),
		unaryHandler("Fetch", nodeService.Fetch),
		unaryHandler("Health", nodeService.Health),
		unaryHandler("BlockMetadata", nodeService.BlockMetadata),
		unaryHandler("FetchBlock", nodeService.FetchBlock),
		unaryHandler("FetchUnflushed", nodeService.FetchUnflushed),
	},
	Metadata: "dbnode/rpc (hand-written, see docs/format/rpc.md)",
}
