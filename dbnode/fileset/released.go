package fileset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Released records that a shard was dropped from this node while its
// section of block BlockStart lay in version 2 volumes that other shards
// still use: sections of that shard in volumes up to Volume must not be
// served again (a restart would otherwise bring the shard's old data
// back). A volume written later for the shard (it came back to this node)
// has a higher number and is served as usual.
type Released struct {
	Shard      uint32
	BlockStart int64
	Volume     int
}

// releasedName is the file in the namespace directory holding the
// namespace's Released records; not a fileset name, so List and
// ListBlocks ignore it.
const releasedName = "released.db"

var magicReleased = [4]byte{'T', 'S', 'F', 'R'}

const releasedRowSize = 4 + 8 + 4

// ReleasedPath is the path of a namespace's released-shards file.
func ReleasedPath(root, namespace string) string {
	return filepath.Join(NamespaceDir(root, namespace), releasedName)
}

// WriteReleased replaces the namespace's released-shards file with rs,
// atomically (a crash leaves the old list or the new one).
func WriteReleased(fsys vfs.FS, root, namespace string, rs []Released) error {
	if err := validateNamespace(namespace); err != nil {
		return fmt.Errorf("write released shards: %w", err)
	}
	b := appendHeaderVersion(make([]byte, 0, 16+len(rs)*releasedRowSize), magicReleased, blockVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rs)))
	for _, r := range rs {
		if r.Volume < 0 || r.Volume > maxVolume {
			return fmt.Errorf("write released shards: %w: volume %d out of range", ErrInvalidInput, r.Volume)
		}
		b = binary.LittleEndian.AppendUint32(b, r.Shard)
		b = binary.LittleEndian.AppendUint64(b, uint64(r.BlockStart))
		b = binary.LittleEndian.AppendUint32(b, uint32(r.Volume))
	}
	if err := vfs.WriteFileAtomic(fsys, ReleasedPath(root, namespace), seal(b)); err != nil {
		return fmt.Errorf("write released shards of %s: %w", namespace, err)
	}
	return nil
}

// ReadReleased reads the namespace's released-shards file; a missing file
// is an empty list, a damaged one an error wrapping ErrCorrupt.
func ReadReleased(fsys vfs.FS, root, namespace string) ([]Released, error) {
	if err := validateNamespace(namespace); err != nil {
		return nil, fmt.Errorf("read released shards: %w", err)
	}
	path := ReleasedPath(root, namespace)
	b, err := readFile(fsys, path, 1<<30)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read released shards: %w", err)
	}
	rs, err := decodeReleased(path, b)
	if err != nil {
		return nil, fmt.Errorf("read released shards: %w", err)
	}
	return rs, nil
}

func decodeReleased(path string, b []byte) ([]Released, error) {
	body, err := unsealVersion(path, b, magicReleased, blockVersion)
	if err != nil {
		return nil, err
	}
	d := newDecoder(body)
	n := d.U32("count")
	if d.Err != nil || uint64(n) != uint64(len(d.B))/releasedRowSize || len(d.B)%releasedRowSize != 0 {
		return nil, fmt.Errorf("%s: %w: %d records in %d bytes", path, ErrCorrupt, n, len(d.B))
	}
	rs := make([]Released, n)
	for i := range rs {
		rs[i].Shard = d.U32("shard")
		rs[i].BlockStart = int64(d.U64("block start"))
		v := d.U32("volume")
		if v > maxVolume {
			return nil, fmt.Errorf("%s: %w: volume %d out of range", path, ErrCorrupt, v)
		}
		rs[i].Volume = int(v)
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	return rs, nil
}
