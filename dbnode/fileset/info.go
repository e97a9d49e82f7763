package fileset

import (
	"encoding/binary"
	"fmt"
)

// info is the content of the info file: what the fileset is and the totals
// a reader can check the index against.
type info struct {
	id           ID
	blockSize    int64
	seriesCount  uint64
	sampleCount  uint64
	payloadBytes uint64 // sum of uncompressed series payloads
	pageCount    uint64
}

func encodeInfo(in info) []byte {
	b := appendHeader(make([]byte, 0, 80+len(in.id.Namespace)), magicInfo)
	b = binary.LittleEndian.AppendUint32(b, in.id.Shard)
	b = binary.LittleEndian.AppendUint32(b, uint32(in.id.Volume))
	b = binary.LittleEndian.AppendUint64(b, uint64(in.id.BlockStart))
	b = binary.LittleEndian.AppendUint64(b, uint64(in.blockSize))
	b = binary.LittleEndian.AppendUint64(b, in.seriesCount)
	b = binary.LittleEndian.AppendUint64(b, in.sampleCount)
	b = binary.LittleEndian.AppendUint64(b, in.payloadBytes)
	b = binary.LittleEndian.AppendUint64(b, in.pageCount)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(in.id.Namespace)))
	b = append(b, in.id.Namespace...)
	return seal(b)
}

func decodeInfo(path string, b []byte) (info, error) {
	body, err := unseal(path, b, magicInfo)
	if err != nil {
		return info{}, err
	}
	d := newDecoder(body)
	var in info
	in.id.Shard = d.U32("shard")
	vol := d.U32("volume")
	in.id.BlockStart = int64(d.U64("block start"))
	in.blockSize = int64(d.U64("block size"))
	in.seriesCount = d.U64("series count")
	in.sampleCount = d.U64("sample count")
	in.payloadBytes = d.U64("payload bytes")
	in.pageCount = d.U64("page count")
	nsLen := d.U16("namespace length")
	in.id.Namespace = string(d.Take(int(nsLen), "namespace"))
	if err := d.done(); err != nil {
		return info{}, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if vol > maxVolume {
		return info{}, fmt.Errorf("%s: %w: volume %d out of range", path, ErrCorrupt, vol)
	}
	in.id.Volume = int(vol)
	if in.blockSize <= 0 {
		return info{}, fmt.Errorf("%s: %w: block size %d", path, ErrCorrupt, in.blockSize)
	}
	return in, nil
}
