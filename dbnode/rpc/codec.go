package rpc

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// CodecName is the gRPC content-subtype of our messages
// ("application/grpc+tessera").
const CodecName = "tessera"

// Codec is the gRPC codec of this package: it marshals any Message with its
// hand-written binary form. The client forces it on every call; the server
// finds it by content-subtype in the registry, so other services (such as
// gRPC health) sharing the grpc.Server keep their protobuf codec.
type Codec struct{}

func init() { encoding.RegisterCodecV2(Codec{}) }

// Name implements encoding.CodecV2.
func (Codec) Name() string { return CodecName }

// Marshal implements encoding.CodecV2. Large messages are written into a
// buffer of gRPC's pool, which gRPC returns to the pool once sent.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(Message)
	if !ok {
		return nil, fmt.Errorf("rpc codec: cannot marshal %T", v)
	}
	size := m.Size()
	pool := mem.DefaultBufferPool()
	if mem.IsBelowBufferPoolingThreshold(size) {
		pool = nil
	}
	var buf *[]byte
	if pool != nil {
		buf = pool.Get(size)
	} else {
		b := make([]byte, size)
		buf = &b
	}
	out := m.MarshalAppend((*buf)[:0])
	if len(out) != size {
		// A Size/MarshalAppend mismatch is a bug of this package; failing
		// the call beats sending a message the peer cannot decode.
		if pool != nil {
			pool.Put(buf)
		}
		return nil, fmt.Errorf("rpc codec: %T marshalled %d bytes, Size said %d", v, len(out), size)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal implements encoding.CodecV2. gRPC frees data when this returns,
// so the bytes are copied once into a fresh slice that the decoded message
// may alias.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(Message)
	if !ok {
		return fmt.Errorf("rpc codec: cannot unmarshal into %T", v)
	}
	return m.Unmarshal(data.Materialize())
}
