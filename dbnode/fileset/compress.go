package fileset

import (
	"encoding/binary"
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

// maxSectionSize bounds one shard's index section before compression (in
// a version 3 index): what a reader will decompress for it.
const maxSectionSize = 1 << 30

// A version 3 index compresses every section with one raw zstd dictionary
// per volume, stored in the index head: most sections hold a few series
// (10,000 series over 4096 shards: two or three), too little for zstd to
// find the label names and values they share with the other sections.
const (
	dictTarget  = 32 << 10 // bytes sampled from the sections
	dictSample  = 2 << 10  // at most this much from one section
	maxDictSize = 64 << 10 // what a reader accepts
	dictID      = 1        // the ID frames name their dictionary by
)

// buildDict samples raw sections evenly, up to dictSample bytes from each,
// into a raw dictionary of at most dictTarget bytes. Empty if every
// section is.
func buildDict(raws [][]byte) []byte {
	total := 0
	for _, r := range raws {
		total += min(len(r), dictSample)
	}
	step := 1
	if total > dictTarget {
		step = (total + dictTarget - 1) / dictTarget
	}
	dict := make([]byte, 0, dictTarget)
	for i := 0; i < len(raws) && len(dict) < dictTarget; i += step {
		r := raws[i][:min(len(raws[i]), dictSample, dictTarget-len(dict))]
		dict = append(dict, r...)
	}
	return dict
}

// newDictEncoder returns an encoder for the sections of one volume. Close
// it when done. SpeedFastest: every section is its own frame, and each
// frame resets the encoder's tables from the dictionary; at the default
// level that copy dominated a peer bootstrap's flushed-block install
// (BenchmarkPeerBootstrap/flushed: 0.88-1.01 -> 0.72-0.85 CPU-s), while
// the index is only ~1% larger (BenchmarkBlockIndexSize: 71.5 -> 71.7 and
// 31.2 -> 31.6 bytes a series).
func newDictEncoder(dict []byte) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), // sections carry their own CRC32C
		zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderDictRaw(dictID, dict),
	)
}

// newDictDecoder returns a decoder for the sections of one volume. Close
// it when done.
func newDictDecoder(dict []byte) (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(maxSectionSize),
		zstd.WithDecoderDictRaw(dictID, dict),
	)
}

// appendCompressedSection appends raw as a version 3 index stores a
// section (or its dictionary): its length as a u32, then one zstd frame
// (nothing if raw is empty). enc nil compresses without a dictionary.
func appendCompressedSection(dst, raw []byte, enc *zstd.Encoder) ([]byte, error) {
	if len(raw) > maxSectionSize {
		return dst, fmt.Errorf("index section of %d bytes exceeds %d", len(raw), maxSectionSize)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(raw)))
	if len(raw) == 0 {
		return dst, nil
	}
	if enc == nil {
		enc = pageEncoder()
	}
	return enc.EncodeAll(raw, dst), nil
}

// decompressSection decodes what appendCompressedSection stored: it
// inflates to exactly the recorded length, at most limit bytes, or fails.
// dec nil decodes without a dictionary.
func decompressSection(b []byte, limit uint32, dec *zstd.Decoder) ([]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("compressed section truncated (%d bytes)", len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if n > limit {
		return nil, fmt.Errorf("section size %d exceeds %d", n, limit)
	}
	src := b[4:]
	if n == 0 {
		if len(src) != 0 {
			return nil, fmt.Errorf("empty section has %d compressed bytes", len(src))
		}
		return nil, nil
	}
	// A frame that declares its size (not every one does) must declare
	// the recorded size, checked before n bytes are allocated for it.
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return nil, fmt.Errorf("frame header: %w", err)
	}
	if h.Skippable || (h.HasFCS && h.FrameContentSize != uint64(n)) {
		return nil, fmt.Errorf("frame declares %d bytes (known %v), section records %d", h.FrameContentSize, h.HasFCS, n)
	}
	if dec == nil {
		dec = pageDecoder()
	}
	out, err := dec.DecodeAll(src, make([]byte, 0, n))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(out) != int(n) {
		return nil, fmt.Errorf("section decompressed to %d bytes, expected %d", len(out), n)
	}
	return out, nil
}
