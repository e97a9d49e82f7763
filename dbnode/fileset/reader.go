package fileset

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Reader reads one complete fileset. Open validates the checkpoint, digest,
// info and index files and keeps the index in memory; data pages are read
// and decompressed on demand. All methods are safe for concurrent use.
//
// Slices passed to callbacks (series IDs, RangeData payloads) must not be
// modified; Read returns a copy the caller owns.
type Reader struct {
	id        ID
	version   int // format version of the files read
	blockSize int64
	samples   int
	diskSize  int64
	dataPath  string
	dataOff   int64   // where the bytes dataSum covers start in the data file
	dataSum   fileSum // version 1: the whole data file; version 2: this shard's range
	ix        *index
	data      *sharedFile
	cache     *PageCache
	serial    uint64
	closed    atomic.Bool
}

// sharedFile is a data file open for several readers: a version 2 data
// file holds every shard of a volume, each shard's Reader holding one
// reference. The last release closes it.
type sharedFile struct {
	vfs.File
	refs atomic.Int64
}

func newSharedFile(f vfs.File) *sharedFile {
	s := &sharedFile{File: f}
	s.refs.Store(1)
	return s
}

func (s *sharedFile) acquire() { s.refs.Add(1) }

func (s *sharedFile) release() error {
	if s.refs.Add(-1) == 0 {
		return s.File.Close()
	}
	return nil
}

var readerSerial atomic.Uint64

// OpenOptions tunes Open. The zero value is the default.
type OpenOptions struct {
	// Cache holds decompressed pages; nil uses a process-wide cache of
	// DefaultPageCacheBytes.
	Cache *PageCache
}

// Open opens the fileset id with default options.
func Open(fsys vfs.FS, root string, id ID) (*Reader, error) {
	return OpenWith(fsys, root, id, OpenOptions{})
}

// OpenWith opens the fileset id. Corruption of any file is reported as an
// error wrapping ErrCorrupt that names the file and the problem; a missing
// checkpoint is an error wrapping fs.ErrNotExist.
func OpenWith(fsys vfs.FS, root string, id ID, opts OpenOptions) (*Reader, error) {
	r, err := open(fsys, root, id, opts)
	if err != nil {
		return nil, fmt.Errorf("open fileset %v: %w", id, err)
	}
	return r, nil
}

func open(fsys vfs.FS, root string, id ID, opts OpenOptions) (*Reader, error) {
	if err := id.validate(); err != nil {
		return nil, err
	}
	cp, err := readCheckpoint(fsys, filePath(root, id, kindCheckpoint), id)
	if err != nil {
		return nil, err
	}
	dgPath := filePath(root, id, kindDigest)
	dgBytes, err := readFile(fsys, dgPath, maxSmallFile)
	if err != nil {
		return nil, err
	}
	if err := checkSum(dgPath, dgBytes, cp.digest); err != nil {
		return nil, err
	}
	dg, err := decodeDigest(dgPath, dgBytes)
	if err != nil {
		return nil, err
	}
	infoPath := filePath(root, id, kindInfo)
	infoBytes, err := readFile(fsys, infoPath, maxSmallFile)
	if err != nil {
		return nil, err
	}
	if err := checkSum(infoPath, infoBytes, dg.info); err != nil {
		return nil, err
	}
	in, err := decodeInfo(infoPath, infoBytes)
	if err != nil {
		return nil, err
	}
	if in.id != id {
		return nil, fmt.Errorf("%s: %w: info is for fileset %v", infoPath, ErrCorrupt, in.id)
	}
	ixPath := filePath(root, id, kindIndex)
	ixBytes, err := readFile(fsys, ixPath, dg.index.size)
	if err != nil {
		return nil, err
	}
	if err := checkSum(ixPath, ixBytes, dg.index); err != nil {
		return nil, err
	}
	ix, err := decodeIndex(ixPath, ixBytes, in, dg.data.size)
	if err != nil {
		return nil, err
	}
	if in.sampleCount > uint64(maxInt) {
		return nil, fmt.Errorf("%s: %w: sample count %d overflows int", infoPath, ErrCorrupt, in.sampleCount)
	}

	dataPath := filePath(root, id, kindData)
	data, err := openData(fsys, dataPath, dg.data.size)
	if err != nil {
		return nil, err
	}
	cache := opts.Cache
	if cache == nil {
		cache = defaultPageCache
	}
	return &Reader{
		id:        id,
		version:   1,
		blockSize: in.blockSize,
		samples:   int(in.sampleCount),
		diskSize:  int64(len(encodeCheckpoint(cp))) + cp.digest.size + dg.info.size + dg.index.size + dg.data.size,
		dataPath:  dataPath,
		dataSum:   dg.data,
		ix:        ix,
		data:      newSharedFile(data),
		cache:     cache,
		serial:    readerSerial.Add(1),
	}, nil
}

const maxInt = int(^uint(0) >> 1)

// openData opens the data file and checks its size and header (version 1
// or 2, as asked); its
// checksum covers the whole file and is checked by Verify, not Open, which
// would otherwise read every byte.
func openData(fsys vfs.FS, path string, size int64) (vfs.File, error) {
	return openDataVersion(fsys, path, size, formatVersion)
}

func openDataVersion(fsys vfs.FS, path string, size int64, version uint32) (vfs.File, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (vfs.File, error) {
		f.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if st.Size() != size {
		return fail(fmt.Errorf("%s: %w: %d bytes, digest says %d", path, ErrCorrupt, st.Size(), size))
	}
	var hdr [headerSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fail(fmt.Errorf("%s: %w: reading header: %v", path, ErrCorrupt, err))
	}
	if !bytes.Equal(hdr[:], appendHeaderVersion(nil, magicData, version)) {
		return fail(fmt.Errorf("%s: %w: bad header %x", path, ErrCorrupt, hdr))
	}
	return f, nil
}

// ID returns the fileset's identity: for a version 2 volume, the shard's
// section of it.
func (r *Reader) ID() ID { return r.id }

// Version returns the format version of the files the reader reads: 1 for
// a per-shard fileset, 2 for a shard's section of a per-block volume.
func (r *Reader) Version() int { return r.version }

// BlockSize returns the block size in milliseconds.
func (r *Reader) BlockSize() int64 { return r.blockSize }

// Len returns the number of series.
func (r *Reader) Len() int { return len(r.ix.entries) }

// Samples returns the total sample count of all series.
func (r *Reader) Samples() int { return r.samples }

// DiskSize returns the bytes the fileset's files take on disk; for a
// version 2 volume, the bytes of this shard's index section and data.
func (r *Reader) DiskSize() int64 { return r.diskSize }

// Read returns the payload of seriesID, verified against its checksum; the
// caller owns the returned slice. ok is false if the fileset does not hold
// the series. A checksum mismatch is an error wrapping ErrCorrupt.
func (r *Reader) Read(seriesID []byte) (data []byte, ok bool, err error) {
	data, ok, err = r.ReadShared(seriesID)
	if !ok || err != nil {
		return nil, ok, err
	}
	return bytes.Clone(data), true, nil
}

// HoldsHistograms reports whether a series of the fileset holds native
// histograms; known is false when its index predates series kinds (index
// version 4), and only reading the payloads tells.
func (r *Reader) HoldsHistograms() (holds, known bool) {
	return r.ix.hist > 0, r.ix.kinds
}

// Kind returns what the index records of seriesID's payload, without
// reading it: KindUnknown when the index predates kinds. ok is false if
// the fileset does not hold the series.
func (r *Reader) Kind(seriesID []byte) (k Kind, ok bool) {
	i, found := r.find(seriesID)
	if !found {
		return KindUnknown, false
	}
	return r.ix.entries[i].kind, true
}

// ReadShared is Read without the copy, for a reader that only decodes
// the payload: data may alias a page the cache holds (pages are
// immutable), so it must not be modified; it stays valid after the call.
func (r *Reader) ReadShared(seriesID []byte) (data []byte, ok bool, err error) {
	if r.closed.Load() {
		return nil, false, ErrClosed
	}
	i, found := r.find(seriesID)
	if !found {
		return nil, false, nil
	}
	e := r.ix.entries[i]
	page, err := r.page(e.page)
	if err != nil {
		return nil, false, r.errorf("read series %q: %w", seriesID, err)
	}
	payload := page[e.off : e.off+e.size : e.off+e.size]
	if err := r.verify(i, payload); err != nil {
		return nil, false, err
	}
	return payload, true, nil
}

func (r *Reader) find(seriesID []byte) (int, bool) {
	n := len(r.ix.entries)
	i := sort.Search(n, func(i int) bool { return bytes.Compare(r.ix.id(i), seriesID) >= 0 })
	return i, i < n && bytes.Equal(r.ix.id(i), seriesID)
}

// verify checks the payload of entry i against its stored checksum.
func (r *Reader) verify(i int, payload []byte) error {
	e := r.ix.entries[i]
	if got := xxhash.Sum64(payload); got != e.checksum {
		return r.errorf("series %q: %w: payload checksum mismatch (computed %016x, index says %016x)",
			r.ix.id(i), ErrCorrupt, got, e.checksum)
	}
	return nil
}

func (r *Reader) errorf(format string, args ...any) error {
	return fmt.Errorf("fileset %v: %s: "+format, append([]any{r.id, r.dataPath}, args...)...)
}

// page returns decompressed page p, from the cache or from disk.
func (r *Reader) page(p uint32) ([]byte, error) {
	k := pageKey{reader: r.serial, page: p}
	if b, ok := r.cache.get(k); ok {
		return b, nil
	}
	comp := compPool.Get().(*[]byte)
	defer compPool.Put(comp)
	// The page is kept by the cache, so it gets its own buffer.
	b, err := r.loadPage(p, comp, nil)
	if err != nil {
		return nil, err
	}
	r.cache.add(k, b)
	return b, nil
}

// compPool recycles the buffers compressed pages are read into.
var compPool = sync.Pool{New: func() any { return new([]byte) }}

// loadPage reads page p into *comp (grown if needed), checks its CRC and
// decompresses it into out (reused if big enough).
func (r *Reader) loadPage(p uint32, comp *[]byte, out []byte) ([]byte, error) {
	ref := r.ix.pages[p]
	if cap(*comp) < int(ref.clen) {
		*comp = make([]byte, ref.clen)
	}
	buf := (*comp)[:ref.clen]
	if _, err := r.data.ReadAt(buf, ref.offset); err != nil {
		return nil, fmt.Errorf("page %d: %w", p, err)
	}
	if got := crc32c(buf); got != ref.crc {
		return nil, fmt.Errorf("page %d: %w: checksum mismatch (computed %08x, index says %08x)", p, ErrCorrupt, got, ref.crc)
	}
	b, err := decompressPage(buf, ref.ulen, out)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w: %v", p, ErrCorrupt, err)
	}
	return b, nil
}

// RangeIndex calls fn for every series in ID order with its payload
// checksum (xxhash64), payload size and sample count, without reading data.
// It stops at the first error fn returns and returns it.
func (r *Reader) RangeIndex(fn func(seriesID []byte, checksum uint64, size int, samples int) error) error {
	if r.closed.Load() {
		return ErrClosed
	}
	for i, e := range r.ix.entries {
		if err := fn(r.ix.id(i), e.checksum, int(e.size), int(e.samples)); err != nil {
			return err
		}
	}
	return nil
}

// RangeData calls fn for every series in ID order with its verified
// payload, reading the data file page by page without going through the
// page cache. data is valid only during fn. It stops at the first error.
func (r *Reader) RangeData(fn func(seriesID, data []byte) error) error {
	if r.closed.Load() {
		return ErrClosed
	}
	var (
		comp, page []byte
		loaded     = -1
	)
	for i, e := range r.ix.entries {
		if int(e.page) != loaded {
			b, err := r.loadPage(e.page, &comp, page)
			if err != nil {
				return r.errorf("scan: %w", err)
			}
			page, loaded = b, int(e.page)
		}
		payload := page[e.off : e.off+e.size : e.off+e.size]
		if err := r.verify(i, payload); err != nil {
			return err
		}
		if err := fn(r.ix.id(i), payload); err != nil {
			return err
		}
	}
	return nil
}

// Verify reads the whole data file and checks it against the digest, then
// every page and payload checksum: a scrub for bit rot that Open does not
// pay for.
func (r *Reader) Verify() error {
	if r.closed.Load() {
		return ErrClosed
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(r.data, r.dataOff, r.dataSum.size))
	if err != nil {
		return r.errorf("verify: %w", err)
	}
	if n != r.dataSum.size || h.Sum32() != r.dataSum.crc {
		return r.errorf("verify: %w: data checksum mismatch (%d bytes, crc %08x; expected %d bytes, crc %08x)",
			ErrCorrupt, n, h.Sum32(), r.dataSum.size, r.dataSum.crc)
	}
	return r.RangeData(func(_, _ []byte) error { return nil })
}

// Close releases the data file and the reader's cached pages. Closing twice
// is a no-op. Other methods return ErrClosed after Close.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.cache.purge(r.serial)
	if err := r.data.release(); err != nil {
		return fmt.Errorf("close fileset %v: %w", r.id, err)
	}
	return nil
}
