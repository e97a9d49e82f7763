package fileset

import (
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Volume is an open version 2 volume: its checkpoint, index head and data
// file checked, its shards' sections not yet. OpenShard gives a Reader per
// shard, checking that shard's section only, so damage to one section
// costs that shard and not the others. Readers keep the data file open
// after the Volume is closed.
type Volume struct {
	id        BlockID
	blockSize int64
	ixPath    string
	dataPath  string
	ix        []byte
	head      blockIndexHead
	cp        blockCheckpoint
	data      *sharedFile
	cache     *PageCache
	dec       *zstd.Decoder // version 3 index with a dictionary: its sections' decoder
	closed    bool
}

// OpenBlock opens volume id. Corruption of the checkpoint, of the index's
// head (header, shard table, its CRC) or of the data file's size or header
// is an error wrapping ErrCorrupt naming the file: the whole volume is
// unusable. A missing checkpoint wraps fs.ErrNotExist.
func OpenBlock(fsys vfs.FS, root string, id BlockID, opts OpenOptions) (*Volume, error) {
	v, err := openBlock(fsys, root, id, opts)
	if err != nil {
		return nil, fmt.Errorf("open volume %v: %w", id, err)
	}
	return v, nil
}

func openBlock(fsys vfs.FS, root string, id BlockID, opts OpenOptions) (*Volume, error) {
	if err := id.validate(); err != nil {
		return nil, err
	}
	cp, err := readBlockCheckpoint(fsys, blockFilePath(root, id, kindCheckpoint), id)
	if err != nil {
		return nil, err
	}
	ixPath := blockFilePath(root, id, kindIndex)
	ix, err := readFile(fsys, ixPath, cp.index.size)
	if err != nil {
		return nil, err
	}
	if int64(len(ix)) != cp.index.size {
		return nil, fmt.Errorf("%s: %w: %d bytes, checkpoint says %d", ixPath, ErrCorrupt, len(ix), cp.index.size)
	}
	head, err := decodeBlockIndexHead(ixPath, ix, cp.index.size, cp.data.size)
	if err != nil {
		return nil, err
	}
	if head.id != id {
		return nil, fmt.Errorf("%s: %w: index is for volume %v", ixPath, ErrCorrupt, head.id)
	}
	if uint32(len(head.sections)) != cp.shards {
		return nil, fmt.Errorf("%s: %w: %d shards, checkpoint says %d", ixPath, ErrCorrupt, len(head.sections), cp.shards)
	}
	dataPath := blockFilePath(root, id, kindData)
	f, err := openDataVersion(fsys, dataPath, cp.data.size, blockVersion)
	if err != nil {
		return nil, err
	}
	var dec *zstd.Decoder
	if len(head.dict) > 0 {
		if dec, err = newDictDecoder(head.dict); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("%s: %w: dictionary: %v", ixPath, ErrCorrupt, err)
		}
	}
	cache := opts.Cache
	if cache == nil {
		cache = defaultPageCache
	}
	return &Volume{
		id: id, blockSize: head.blockSize, ixPath: ixPath, dataPath: dataPath,
		ix: ix, head: head, cp: cp, data: newSharedFile(f), cache: cache, dec: dec,
	}, nil
}

// ID returns the volume's identity.
func (v *Volume) ID() BlockID { return v.id }

// Shards lists the shards that have a section in the volume, increasing.
func (v *Volume) Shards() []uint32 {
	out := make([]uint32, len(v.head.sections))
	for i, s := range v.head.sections {
		out[i] = s.shard
	}
	return out
}

// DiskSize returns the bytes of the volume's three files.
func (v *Volume) DiskSize() int64 {
	return v.cp.index.size + v.cp.data.size + int64(len(encodeBlockCheckpoint(v.cp)))
}

// OpenShard returns a Reader over shard's section. ok is false if the
// volume has no section for shard. A section failing its CRC or any
// invariant is an error wrapping ErrCorrupt naming the shard. The Reader
// holds its own reference to the data file and must be closed.
func (v *Volume) OpenShard(shard uint32) (r *Reader, ok bool, err error) {
	if v.closed {
		return nil, false, ErrClosed
	}
	for i := range v.head.sections {
		s := &v.head.sections[i]
		if s.shard != shard {
			continue
		}
		r, err := v.openSection(s)
		if err != nil {
			return nil, true, fmt.Errorf("open volume %v shard %d: %w", v.id, shard, err)
		}
		return r, true, nil
	}
	return nil, false, nil
}

func (v *Volume) openSection(s *shardSection) (*Reader, error) {
	b := v.ix[s.index.offset : s.index.offset+s.index.size]
	if got := crc32c(b); got != s.index.crc {
		return nil, fmt.Errorf("%s: %w: shard %d index section checksum mismatch (computed %08x, table says %08x)",
			v.ixPath, ErrCorrupt, s.shard, got, s.index.crc)
	}
	if v.head.version >= indexCompressed {
		raw, err := decompressSection(b, maxSectionSize, v.dec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: shard %d index section: %v", v.ixPath, ErrCorrupt, s.shard, err)
		}
		b = raw
	}
	d := newDecoder(b)
	ix, samples, payload, err := decodeSection(&d, s.seriesCount, s.pageCount, s.data.offset, s.data.offset+s.data.size, v.head.version >= blockIndexVersion)
	if err == nil {
		err = d.done()
	}
	if err == nil && (samples != s.sampleCount || payload != s.payloadBytes) {
		err = fmt.Errorf("section totals %d samples / %d payload bytes, table says %d / %d", samples, payload, s.sampleCount, s.payloadBytes)
	}
	if err == nil && samples > uint64(maxInt) {
		err = fmt.Errorf("sample count %d overflows int", samples)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: shard %d: %v", v.ixPath, ErrCorrupt, s.shard, err)
	}
	// Copy the IDs out of the whole index so a Reader does not pin it.
	ix.ids = append([]byte(nil), ix.ids...)
	v.data.acquire()
	return &Reader{
		id:        v.id.Shard(s.shard),
		version:   blockVersion,
		blockSize: v.blockSize,
		samples:   int(samples),
		diskSize:  s.index.size + s.data.size,
		dataPath:  v.dataPath,
		dataOff:   s.data.offset,
		dataSum:   fileSum{size: s.data.size, crc: s.data.crc},
		ix:        ix,
		data:      v.data,
		cache:     v.cache,
		serial:    readerSerial.Add(1),
	}, nil
}

// Verify checks the whole index and data files against the checkpoint: a
// scrub for bit rot that OpenBlock does not pay for.
func (v *Volume) Verify() error {
	if v.closed {
		return ErrClosed
	}
	if got := crc32c(v.ix); got != v.cp.index.crc {
		return fmt.Errorf("volume %v: %s: %w: checksum mismatch (computed %08x, checkpoint says %08x)", v.id, v.ixPath, ErrCorrupt, got, v.cp.index.crc)
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(v.data, 0, v.cp.data.size+1))
	if err != nil {
		return fmt.Errorf("volume %v: verify %s: %w", v.id, v.dataPath, err)
	}
	if n != v.cp.data.size || h.Sum32() != v.cp.data.crc {
		return fmt.Errorf("volume %v: %s: %w: checksum mismatch (%d bytes, crc %08x; checkpoint says %d bytes, crc %08x)",
			v.id, v.dataPath, ErrCorrupt, n, h.Sum32(), v.cp.data.size, v.cp.data.crc)
	}
	return nil
}

// Close drops the volume's index and its reference to the data file;
// Readers opened from it stay usable until closed. Closing twice is a
// no-op.
func (v *Volume) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	v.ix = nil
	if v.dec != nil {
		v.dec.Close()
		v.dec = nil
	}
	if err := v.data.release(); err != nil {
		return fmt.Errorf("close volume %v: %w", v.id, err)
	}
	return nil
}
