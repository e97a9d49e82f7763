package fileset

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// BlockID names one volume of one block of one namespace in the per-block
// layout (format version 2): the files of a volume hold a section for each
// of the shards written into it, so the file count of a block does not grow
// with the number of shards.
type BlockID struct {
	Namespace  string
	BlockStart int64
	Volume     int
}

func (id BlockID) String() string {
	return fmt.Sprintf("%s/block/%d/v%d", id.Namespace, id.BlockStart, id.Volume)
}

func (id BlockID) validate() error {
	return ID{Namespace: id.Namespace, BlockStart: id.BlockStart, Volume: id.Volume}.validate()
}

// Shard returns the ID of shard's section of the volume, as its Reader
// reports it.
func (id BlockID) Shard(shard uint32) ID {
	return ID{Namespace: id.Namespace, Shard: shard, BlockStart: id.BlockStart, Volume: id.Volume}
}

// blockKinds are the files of a version 2 volume in write order; the
// checkpoint is last. Info and digest are folded into the index and the
// checkpoint.
var blockKinds = []fileKind{kindData, kindIndex, kindCheckpoint}

// BlockFilePath is the path of one file of a volume ("data", "index",
// "checkpoint"): directly in the namespace directory, beside the shard
// directories of version 1. Exposed for tools and tests.
func BlockFilePath(root string, id BlockID, kind string) string {
	return filepath.Join(NamespaceDir(root, id.Namespace), blockFileName(id, fileKind(kind)))
}

func blockFilePath(root string, id BlockID, kind fileKind) string {
	return BlockFilePath(root, id, string(kind))
}

func blockFileName(id BlockID, kind fileKind) string {
	return filePrefix + strconv.FormatInt(id.BlockStart, 10) + "-" +
		strconv.Itoa(id.Volume) + "-" + string(kind) + fileSuffix
}

// shardSection is one row of a version 2 index's shard table.
type shardSection struct {
	shard        uint32
	seriesCount  uint64
	pageCount    uint64
	sampleCount  uint64
	payloadBytes uint64
	index        sectionRange // the section in the index file
	data         sectionRange // the shard's pages in the data file
}

// sectionRange is a byte range of a file and the CRC32C of its bytes.
type sectionRange struct {
	offset int64
	size   int64
	crc    uint32
}

// shardRowSize is the encoded size of a shardSection.
const shardRowSize = 4 + 4*8 + 2*(8+8+4)

// BlockWriter writes one volume of a block in the per-block layout: the
// caller adds each shard's series with WriteShard, in increasing shard
// order, then commits with Finish. Pages go to the data file as shards are
// added, so only one shard's payloads need be in memory at a time; the
// index is kept in memory (IDs and locations) until Finish.
//
// Nothing is visible before Finish writes the checkpoint, after the data
// and index files and the directory are fsynced: whatever a crash or an
// error leaves behind has no valid checkpoint, so ListBlocks ignores it.
// It also has the volume's pending marker, created before the data file
// and removed only after the checkpoint is durable (kindPending), so
// ResolveIncompleteBlocks deletes it as an interrupted flush instead of
// taking it for damage. Abort deletes what was written, marker last.
type BlockWriter struct {
	fs        vfs.FS
	root      string
	id        BlockID
	blockSize int64

	data    vfs.File
	dataBuf *bufio.Writer
	dataCRC uint32
	offset  int64 // bytes written to the data file
	created []fileKind

	sections []shardSection
	index    []byte // sections, back to back (uncompressed until Finish)
	// indexVersion is blockIndexVersion unless SetIndexVersion asked for
	// an earlier one (volumes as earlier releases wrote them).
	indexVersion uint32
	err          error // first error: the writer is then unusable
	done         bool
}

// CreateBlock starts writing volume id of a block; blockSize is in
// milliseconds. It fails with ErrExists if that volume is already complete
// on disk. Concurrent writers of the same id are not supported.
func CreateBlock(fsys vfs.FS, root string, id BlockID, blockSize int64) (*BlockWriter, error) {
	w, err := createBlock(fsys, root, id, blockSize)
	if err != nil {
		return nil, fmt.Errorf("write volume %v: %w", id, err)
	}
	return w, nil
}

func createBlock(fsys vfs.FS, root string, id BlockID, blockSize int64) (*BlockWriter, error) {
	if err := id.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	if blockSize <= 0 {
		return nil, fmt.Errorf("%w: block size %d must be positive", ErrInvalidInput, blockSize)
	}
	dir := NamespaceDir(root, id.Namespace)
	if err := ensureDir(fsys, root, dir); err != nil {
		return nil, err
	}
	cpPath := blockFilePath(root, id, kindCheckpoint)
	switch _, err := readBlockCheckpoint(fsys, cpPath, id); {
	case err == nil:
		return nil, ErrExists
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, ErrCorrupt):
		// A torn checkpoint of a crashed attempt: the volume is
		// incomplete and ours to replace.
		if err := fsys.Remove(cpPath); err != nil {
			return nil, fmt.Errorf("remove stale checkpoint: %w", err)
		}
	default:
		return nil, err
	}
	w := &BlockWriter{fs: fsys, root: root, id: id, blockSize: blockSize, indexVersion: blockIndexVersion}
	if err := markPending(fsys, root, id); err != nil {
		return nil, err
	}
	w.created = append(w.created, kindPending)
	f, err := fsys.Create(blockFilePath(root, id, kindData))
	if err != nil {
		return nil, fmt.Errorf("create data file: %w", err)
	}
	w.created = append(w.created, kindData)
	w.data, w.dataBuf = f, bufio.NewWriterSize(f, 256<<10)
	if err := w.writeData(appendHeaderVersion(nil, magicData, blockVersion)); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write data file: %w", err)
	}
	return w, nil
}

// SetIndexVersion makes the writer write the index in an earlier version
// (2: raw sections; 3: compressed sections without series kinds), as
// releases before the current one did: for tests and tools that need such
// volumes. Call it before the first WriteShard.
func (w *BlockWriter) SetIndexVersion(v uint32) error {
	if v != blockVersion && v != indexCompressed && v != blockIndexVersion {
		return fmt.Errorf("%w: index version %d", ErrInvalidInput, v)
	}
	if len(w.sections) > 0 {
		return fmt.Errorf("%w: index version set after a shard was written", ErrInvalidInput)
	}
	w.indexVersion = v
	return nil
}

func (w *BlockWriter) writeData(b []byte) error {
	n, err := w.dataBuf.Write(b)
	w.dataCRC = crc32.Update(w.dataCRC, castagnoli, b[:n])
	w.offset += int64(n)
	return err
}

// rangeWriter is the data file as writePages sees it, also checksumming
// one shard's range.
type rangeWriter struct {
	w   *BlockWriter
	crc uint32
}

func (r *rangeWriter) Write(p []byte) (int, error) {
	if err := r.w.writeData(p); err != nil {
		return 0, err
	}
	r.crc = crc32.Update(r.crc, castagnoli, p)
	return len(p), nil
}

// WriteShard adds a shard's section: series sorted by ID without
// duplicates. Shards must come in strictly increasing order. An empty
// series list is a section with no series. After an error the writer is
// unusable: call Abort.
func (w *BlockWriter) WriteShard(shard uint32, series []Series) error {
	if w.err != nil {
		return fmt.Errorf("write volume %v: writer failed earlier: %w", w.id, w.err)
	}
	if err := w.writeShard(shard, series); err != nil {
		w.err = err
		return fmt.Errorf("write volume %v shard %d: %w", w.id, shard, err)
	}
	return nil
}

func (w *BlockWriter) writeShard(shard uint32, series []Series) error {
	if w.done {
		return fmt.Errorf("%w: volume already finished", ErrInvalidInput)
	}
	if n := len(w.sections); n > 0 && w.sections[n-1].shard >= shard {
		return fmt.Errorf("%w: shard %d after shard %d: shards must be increasing", ErrInvalidInput, shard, w.sections[n-1].shard)
	}
	if err := checkInput(w.id.Shard(shard), w.blockSize, series); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	entries := make([]entry, len(series))
	start := w.offset
	rw := &rangeWriter{w: w}
	pages, end, err := writePages(rw, series, entries, start)
	if err != nil {
		return fmt.Errorf("write data file: %w", err)
	}
	sec := shardSection{
		shard:       shard,
		seriesCount: uint64(len(series)),
		pageCount:   uint64(len(pages)),
		data:        sectionRange{offset: start, size: end - start, crc: rw.crc},
	}
	for i, e := range entries {
		sec.sampleCount += uint64(series[i].Samples)
		sec.payloadBytes += uint64(e.size)
	}
	ixStart := len(w.index)
	w.index = appendSection(w.index, series, entries, pages, w.indexVersion >= blockIndexVersion)
	if w.indexVersion >= indexCompressed && len(w.index)-ixStart > maxSectionSize {
		return fmt.Errorf("%w: index section of %d bytes exceeds %d", ErrInvalidInput, len(w.index)-ixStart, maxSectionSize)
	}
	sec.index = sectionRange{offset: int64(ixStart), size: int64(len(w.index) - ixStart), crc: crc32c(w.index[ixStart:])}
	w.sections = append(w.sections, sec)
	return nil
}

// Finish makes the volume durable and complete: it fsyncs the data file,
// writes and fsyncs the index, fsyncs the directory, then writes and
// fsyncs the checkpoint and fsyncs the directory again: five fsyncs per
// volume, whatever the number of shards. Then it removes the pending
// marker. On error it removes what it wrote (checkpoint first).
func (w *BlockWriter) Finish() error {
	if w.err != nil {
		return fmt.Errorf("write volume %v: writer failed earlier: %w", w.id, w.err)
	}
	if w.done {
		return fmt.Errorf("write volume %v: %w: already finished", w.id, ErrInvalidInput)
	}
	if err := w.finish(); err != nil {
		w.err = err
		w.Abort()
		return fmt.Errorf("write volume %v: %w", w.id, err)
	}
	w.done = true
	return nil
}

func (w *BlockWriter) finish() error {
	err := w.dataBuf.Flush()
	if err == nil {
		if err = w.data.Sync(); err != nil {
			err = fmt.Errorf("sync: %w", err)
		}
	}
	if cerr := w.data.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	w.data = nil
	if err != nil {
		return fmt.Errorf("write data file: %w", err)
	}
	dataSum := fileSum{size: w.offset, crc: w.dataCRC}

	var dict []byte
	if w.indexVersion >= indexCompressed {
		if dict, err = w.compressSections(); err != nil {
			return fmt.Errorf("compress index: %w", err)
		}
	}
	head := encodeBlockIndexHead(w.id, w.blockSize, w.indexVersion, dict, w.sections)
	ixSum, err := w.writeFile(kindIndex, head, w.index)
	if err != nil {
		return err
	}
	dir := NamespaceDir(w.root, w.id.Namespace)
	if err := w.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	cp := encodeBlockCheckpoint(blockCheckpoint{id: w.id, shards: uint32(len(w.sections)), index: ixSum, data: dataSum})
	if _, err := w.writeFile(kindCheckpoint, cp); err != nil {
		return err
	}
	if err := w.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory after checkpoint: %w", err)
	}
	// Not made durable here: a marker beside a valid checkpoint is
	// removed at the next start (ResolveIncompleteBlocks).
	if err := w.fs.Remove(blockFilePath(w.root, w.id, kindPending)); err != nil {
		return fmt.Errorf("remove pending marker: %w", err)
	}
	return nil
}

// compressSections replaces the raw sections in w.index by their
// compressed form (version 3), with a dictionary sampled from them, and
// returns the dictionary as the head stores it (itself compressed, without
// a dictionary).
func (w *BlockWriter) compressSections() ([]byte, error) {
	raws := make([][]byte, len(w.sections))
	for i, s := range w.sections {
		raws[i] = w.index[s.index.offset : s.index.offset+s.index.size]
	}
	dict := buildDict(raws)
	var enc *zstd.Encoder
	if len(dict) > 0 {
		var err error
		if enc, err = newDictEncoder(dict); err != nil {
			return nil, err
		}
		defer enc.Close()
	}
	out := make([]byte, 0, len(w.index)/4+64)
	for i := range w.sections {
		start := len(out)
		var err error
		if out, err = appendCompressedSection(out, raws[i], enc); err != nil {
			return nil, err
		}
		w.sections[i].index = sectionRange{offset: int64(start), size: int64(len(out) - start), crc: crc32c(out[start:])}
	}
	w.index = out
	return appendCompressedSection(nil, dict, nil)
}

// writeFile creates one file of the volume from parts, fsyncs and closes
// it, and returns its size and CRC32C.
func (w *BlockWriter) writeFile(kind fileKind, parts ...[]byte) (fileSum, error) {
	f, err := w.fs.Create(blockFilePath(w.root, w.id, kind))
	if err != nil {
		return fileSum{}, fmt.Errorf("create %s file: %w", kind, err)
	}
	w.created = append(w.created, kind)
	var sum fileSum
	bw := bufio.NewWriterSize(f, 256<<10)
	for _, p := range parts {
		if _, err = bw.Write(p); err != nil {
			break
		}
		sum.crc = crc32.Update(sum.crc, castagnoli, p)
		sum.size += int64(len(p))
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("sync: %w", err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		return fileSum{}, fmt.Errorf("write %s file: %w", kind, err)
	}
	return sum, nil
}

// Abort removes what the writer wrote, checkpoint first, ignoring errors:
// what survives has no valid checkpoint and is incomplete. Abort after a
// successful Finish does nothing.
func (w *BlockWriter) Abort() {
	if w.done {
		return
	}
	if w.data != nil {
		_ = w.data.Close()
		w.data = nil
	}
	for i := len(w.created) - 1; i >= 0; i-- {
		_ = w.fs.Remove(blockFilePath(w.root, w.id, w.created[i]))
	}
	w.created = nil
}

// WriteBlock writes a complete volume holding the given shards' sections
// (shards increasing, each shard's series sorted by ID).
func WriteBlock(fsys vfs.FS, root string, id BlockID, blockSize int64, shards []ShardSeries) error {
	w, err := CreateBlock(fsys, root, id, blockSize)
	if err != nil {
		return err
	}
	for _, s := range shards {
		if err := w.WriteShard(s.Shard, s.Series); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Finish()
}

// ShardSeries is one shard's series for WriteBlock.
type ShardSeries struct {
	Shard  uint32
	Series []Series
}

// encodeBlockIndexHead encodes the index's head: header, what the volume
// is, the shard table with section offsets made absolute, and the CRC32C
// of all of it. The sections follow.
func encodeBlockIndexHead(id BlockID, blockSize int64, version uint32, dict []byte, sections []shardSection) []byte {
	b := appendHeaderVersion(make([]byte, 0, 64+len(id.Namespace)+len(sections)*shardRowSize+len(dict)), magicIndex, version)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(id.Namespace)))
	b = append(b, id.Namespace...)
	b = binary.LittleEndian.AppendUint64(b, uint64(id.BlockStart))
	b = binary.LittleEndian.AppendUint64(b, uint64(blockSize))
	b = binary.LittleEndian.AppendUint32(b, uint32(id.Volume))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(sections)))
	headSize := int64(len(b) + len(sections)*shardRowSize + 4)
	if version >= indexCompressed {
		headSize += 4 + int64(len(dict))
	}
	for _, s := range sections {
		b = binary.LittleEndian.AppendUint32(b, s.shard)
		b = binary.LittleEndian.AppendUint64(b, s.seriesCount)
		b = binary.LittleEndian.AppendUint64(b, s.pageCount)
		b = binary.LittleEndian.AppendUint64(b, s.sampleCount)
		b = binary.LittleEndian.AppendUint64(b, s.payloadBytes)
		for _, r := range []sectionRange{{offset: headSize + s.index.offset, size: s.index.size, crc: s.index.crc}, s.data} {
			b = binary.LittleEndian.AppendUint64(b, uint64(r.offset))
			b = binary.LittleEndian.AppendUint64(b, uint64(r.size))
			b = binary.LittleEndian.AppendUint32(b, r.crc)
		}
	}
	if version >= indexCompressed {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)))
		b = append(b, dict...)
	}
	return seal(b)
}

// blockIndexHead is the decoded head of a per-block index.
type blockIndexHead struct {
	version   uint32 // blockVersion: raw sections; indexCompressed: compressed; blockIndexVersion: compressed, with kinds
	dict      []byte // version 3: the sections' zstd dictionary, uncompressed; may be empty
	id        BlockID
	blockSize int64
	sections  []shardSection
	size      int64 // bytes of the head, where the first section starts
}

// decodeBlockIndexHead decodes the head at the start of b (the head and
// possibly more of the file) and checks it: CRC, header, that sections
// tile the index from the head to indexSize and the data file from its
// header to dataSize, shards increasing. It never trusts a count before
// bounding it by the bytes available.
func decodeBlockIndexHead(path string, b []byte, indexSize, dataSize int64) (blockIndexHead, error) {
	bad := func(format string, args ...any) (blockIndexHead, error) {
		return blockIndexHead{}, fmt.Errorf("%s: %w: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	d := newDecoder(b)
	hdr := d.Take(headerSize, "header")
	nsLen := d.U16("namespace length")
	ns := d.Take(int(nsLen), "namespace")
	bs := int64(d.U64("block start"))
	blockSize := int64(d.U64("block size"))
	vol := d.U32("volume")
	n := d.U32("shard count")
	if d.Err != nil {
		return bad("%v", d.Err)
	}
	if uint64(n) > uint64(len(d.B))/shardRowSize {
		return bad("shard count %d exceeds file size", n)
	}
	version := uint32(blockIndexVersion)
	if v := binary.LittleEndian.Uint32(hdr[4:]); v == blockVersion || v == indexCompressed {
		version = v
	}
	tableEnd := len(b) - len(d.B) + int(n)*shardRowSize
	headLen := tableEnd + 4
	if version >= indexCompressed {
		// The stored dictionary follows the shard table.
		if tableEnd+4 > len(b) {
			return bad("head truncated")
		}
		headLen += 4 + int(binary.LittleEndian.Uint32(b[tableEnd:]))
	}
	if headLen > len(b) || headLen < tableEnd {
		return bad("head truncated")
	}
	if _, err := unsealVersion(path, b[:headLen], magicIndex, version); err != nil {
		return blockIndexHead{}, err
	}
	if vol > maxVolume {
		return bad("volume %d out of range", vol)
	}
	if blockSize <= 0 {
		return bad("block size %d", blockSize)
	}
	h := blockIndexHead{
		version:   version,
		id:        BlockID{Namespace: string(ns), BlockStart: bs, Volume: int(vol)},
		blockSize: blockSize,
		sections:  make([]shardSection, n),
		size:      int64(headLen),
	}
	nextIx, nextData := h.size, int64(headerSize)
	for i := range h.sections {
		s := &h.sections[i]
		s.shard = d.U32("shard")
		s.seriesCount = d.U64("series count")
		s.pageCount = d.U64("page count")
		s.sampleCount = d.U64("sample count")
		s.payloadBytes = d.U64("payload bytes")
		for _, r := range []*sectionRange{&s.index, &s.data} {
			r.offset = int64(d.U64("section offset"))
			r.size = int64(d.U64("section size"))
			r.crc = d.U32("section checksum")
		}
		if d.Err != nil {
			return bad("%v", d.Err)
		}
		if i > 0 && s.shard <= h.sections[i-1].shard {
			return bad("shard %d after shard %d", s.shard, h.sections[i-1].shard)
		}
		if s.index.offset != nextIx || s.index.size < 0 || s.index.size > indexSize-nextIx {
			return bad("shard %d: index section [%d,+%d) does not follow %d within %d bytes", s.shard, s.index.offset, s.index.size, nextIx, indexSize)
		}
		if s.data.offset != nextData || s.data.size < 0 || s.data.size > dataSize-nextData {
			return bad("shard %d: data range [%d,+%d) does not follow %d within %d bytes", s.shard, s.data.offset, s.data.size, nextData, dataSize)
		}
		nextIx += s.index.size
		nextData += s.data.size
	}
	if version >= indexCompressed {
		stored := d.Take(int(d.U32("dictionary length")), "dictionary")
		if d.Err != nil {
			return bad("%v", d.Err)
		}
		dict, err := decompressSection(stored, maxDictSize, nil)
		if err != nil {
			return bad("dictionary: %v", err)
		}
		h.dict = dict
	}
	if nextIx != indexSize {
		return bad("sections end at %d, index has %d bytes", nextIx, indexSize)
	}
	if nextData != dataSize {
		return bad("data ranges end at %d, data file has %d bytes", nextData, dataSize)
	}
	return h, nil
}

// blockCheckpoint marks a volume complete. It names the volume (so a file
// copied to another name is not taken for it) and holds the size and
// CRC32C of the index and data files.
type blockCheckpoint struct {
	id     BlockID
	shards uint32
	index  fileSum
	data   fileSum
}

func encodeBlockCheckpoint(cp blockCheckpoint) []byte {
	b := appendHeaderVersion(make([]byte, 0, 64+len(cp.id.Namespace)), magicCheckpoint, blockVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(cp.id.BlockStart))
	b = binary.LittleEndian.AppendUint32(b, uint32(cp.id.Volume))
	b = binary.LittleEndian.AppendUint32(b, cp.shards)
	for _, s := range []fileSum{cp.index, cp.data} {
		b = binary.LittleEndian.AppendUint64(b, uint64(s.size))
		b = binary.LittleEndian.AppendUint32(b, s.crc)
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(cp.id.Namespace)))
	b = append(b, cp.id.Namespace...)
	return seal(b)
}

func decodeBlockCheckpoint(path string, b []byte) (blockCheckpoint, error) {
	body, err := unsealVersion(path, b, magicCheckpoint, blockVersion)
	if err != nil {
		return blockCheckpoint{}, err
	}
	d := newDecoder(body)
	var cp blockCheckpoint
	cp.id.BlockStart = int64(d.U64("block start"))
	vol := d.U32("volume")
	cp.shards = d.U32("shard count")
	for _, s := range []*fileSum{&cp.index, &cp.data} {
		s.size = int64(d.U64("file size"))
		s.crc = d.U32("file checksum")
	}
	nsLen := d.U16("namespace length")
	cp.id.Namespace = string(d.Take(int(nsLen), "namespace"))
	if err := d.done(); err != nil {
		return blockCheckpoint{}, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if vol > maxVolume {
		return blockCheckpoint{}, fmt.Errorf("%s: %w: volume %d out of range", path, ErrCorrupt, vol)
	}
	if cp.index.size < 0 || cp.data.size < headerSize {
		return blockCheckpoint{}, fmt.Errorf("%s: %w: impossible file sizes %d, %d", path, ErrCorrupt, cp.index.size, cp.data.size)
	}
	cp.id.Volume = int(vol)
	return cp, nil
}

// readBlockCheckpoint reads and validates the checkpoint of id.
func readBlockCheckpoint(fsys vfs.FS, path string, id BlockID) (blockCheckpoint, error) {
	b, err := readFile(fsys, path, maxSmallFile)
	if err != nil {
		return blockCheckpoint{}, err
	}
	cp, err := decodeBlockCheckpoint(path, b)
	if err != nil {
		return blockCheckpoint{}, err
	}
	if cp.id != id {
		return blockCheckpoint{}, fmt.Errorf("%s: %w: checkpoint is for volume %v", path, ErrCorrupt, cp.id)
	}
	return cp, nil
}
