package fileset

import (
	"encoding/binary"
	"fmt"
)

// fileSum is the size and CRC32C of a whole file.
type fileSum struct {
	size int64
	crc  uint32
}

// digest holds the sums of the info, index and data files; the checkpoint
// in turn holds the sum of the digest, so one chain of checksums covers the
// whole fileset.
type digest struct {
	info, index, data fileSum
}

func encodeDigest(dg digest) []byte {
	b := appendHeader(make([]byte, 0, 48), magicDigest)
	for _, s := range []fileSum{dg.info, dg.index, dg.data} {
		b = binary.LittleEndian.AppendUint64(b, uint64(s.size))
		b = binary.LittleEndian.AppendUint32(b, s.crc)
	}
	return seal(b)
}

func decodeDigest(path string, b []byte) (digest, error) {
	body, err := unseal(path, b, magicDigest)
	if err != nil {
		return digest{}, err
	}
	d := newDecoder(body)
	var dg digest
	for _, s := range []*fileSum{&dg.info, &dg.index, &dg.data} {
		s.size = int64(d.U64("file size"))
		s.crc = d.U32("file checksum")
		if s.size < 0 {
			return digest{}, fmt.Errorf("%s: %w: negative file size", path, ErrCorrupt)
		}
	}
	if err := d.done(); err != nil {
		return digest{}, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	return dg, nil
}

// checkpoint marks a fileset complete. It repeats the ID so a file copied or
// renamed into the wrong place is not taken for another fileset, and holds
// the digest's sum so Open can trust the digest.
type checkpoint struct {
	id     ID
	digest fileSum
}

func encodeCheckpoint(cp checkpoint) []byte {
	b := appendHeader(make([]byte, 0, 48+len(cp.id.Namespace)), magicCheckpoint)
	b = binary.LittleEndian.AppendUint32(b, cp.id.Shard)
	b = binary.LittleEndian.AppendUint32(b, uint32(cp.id.Volume))
	b = binary.LittleEndian.AppendUint64(b, uint64(cp.id.BlockStart))
	b = binary.LittleEndian.AppendUint64(b, uint64(cp.digest.size))
	b = binary.LittleEndian.AppendUint32(b, cp.digest.crc)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(cp.id.Namespace)))
	b = append(b, cp.id.Namespace...)
	return seal(b)
}

func decodeCheckpoint(path string, b []byte) (checkpoint, error) {
	body, err := unseal(path, b, magicCheckpoint)
	if err != nil {
		return checkpoint{}, err
	}
	d := newDecoder(body)
	var cp checkpoint
	cp.id.Shard = d.U32("shard")
	vol := d.U32("volume")
	cp.id.BlockStart = int64(d.U64("block start"))
	cp.digest.size = int64(d.U64("digest size"))
	cp.digest.crc = d.U32("digest checksum")
	nsLen := d.U16("namespace length")
	cp.id.Namespace = string(d.Take(int(nsLen), "namespace"))
	if err := d.done(); err != nil {
		return checkpoint{}, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if vol > maxVolume {
		return checkpoint{}, fmt.Errorf("%s: %w: volume %d out of range", path, ErrCorrupt, vol)
	}
	cp.id.Volume = int(vol)
	return cp, nil
}
