package fileset

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

const (
	// targetPageSize is the uncompressed size a data page is filled to
	// before it is compressed. Pages are the unit of reading, so this trades
	// compression ratio against the bytes read and decompressed per Read.
	targetPageSize = 64 << 10
	// maxSeriesSize bounds one payload; a payload larger than
	// targetPageSize gets a page of its own.
	maxSeriesSize = 1 << 30
	// maxPageSize bounds what a reader will decompress for one page.
	maxPageSize = maxSeriesSize
)

// One encoder and one decoder for the process: EncodeAll and DecodeAll are
// safe for concurrent use and keep their own pools of per-call state, so a
// page costs no encoder setup.
var (
	pageEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false), // pages carry their own CRC32C
			zstd.WithLowerEncoderMem(true),
		)
		if err != nil {
			panic(fmt.Sprintf("fileset: zstd encoder: %v", err)) // static options: cannot fail
		}
		return enc
	})
	pageDecoder = sync.OnceValue(func() *zstd.Decoder {
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(maxPageSize),
		)
		if err != nil {
			panic(fmt.Sprintf("fileset: zstd decoder: %v", err)) // static options: cannot fail
		}
		return dec
	})
)

// compressPage appends the compressed form of page to dst.
func compressPage(page, dst []byte) []byte {
	if len(page) == 0 {
		return dst
	}
	return pageEncoder().EncodeAll(page, dst)
}

// decompressPage decodes src into dst[:0], which must have capacity for
// exactly ulen bytes; the cap limit makes a page that inflates beyond its
// recorded size an error instead of an allocation.
func decompressPage(src []byte, ulen uint32, dst []byte) ([]byte, error) {
	if ulen == 0 {
		if len(src) != 0 {
			return nil, fmt.Errorf("empty page has %d compressed bytes", len(src))
		}
		return dst[:0], nil
	}
	if cap(dst) < int(ulen) {
		dst = make([]byte, 0, ulen)
	}
	out, err := pageDecoder().DecodeAll(src, dst[:0:ulen])
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(out) != int(ulen) {
		return nil, fmt.Errorf("page decompressed to %d bytes, expected %d", len(out), ulen)
	}
	return out, nil
}
