package fileset

import (
	"fmt"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// VolumeDigest is what a version 2 volume's checkpoint says of its
// content: the size and CRC32C of its index and data files and its shard
// count. A volume is immutable once its checkpoint is written (new data
// for the block goes to the next volume index), so a volume found again
// under the same index with the same digest holds the same bytes: an
// incremental backup references what it uploaded from it last time
// instead of reading it again.
type VolumeDigest struct {
	Shards    uint32
	IndexSize int64
	IndexCRC  uint32
	DataSize  int64
	DataCRC   uint32
}

// String is the digest's stable text form (backup manifests store it).
func (d VolumeDigest) String() string {
	return fmt.Sprintf("s%d-i%d.%08x-d%d.%08x", d.Shards, d.IndexSize, d.IndexCRC, d.DataSize, d.DataCRC)
}

// ReadVolumeDigest reads and validates volume id's checkpoint (only the
// checkpoint: a few dozen bytes) and returns its digest.
func ReadVolumeDigest(fsys vfs.FS, root string, id BlockID) (VolumeDigest, error) {
	if err := id.validate(); err != nil {
		return VolumeDigest{}, err
	}
	cp, err := readBlockCheckpoint(fsys, blockFilePath(root, id, kindCheckpoint), id)
	if err != nil {
		return VolumeDigest{}, fmt.Errorf("volume %v: %w", id, err)
	}
	return VolumeDigest{Shards: cp.shards, IndexSize: cp.index.size, IndexCRC: cp.index.crc,
		DataSize: cp.data.size, DataCRC: cp.data.crc}, nil
}
