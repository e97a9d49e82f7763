package fileset

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"path/filepath"

	"github.com/cespare/xxhash/v2"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Series is one series of a block: its ID (canonical label encoding), its
// sealed payload (opaque bytes from dbnode/encoding) and how many samples
// the payload holds.
type Series struct {
	ID      []byte
	Data    []byte
	Samples int
}

// Write writes a complete version 1 (per-shard) fileset for id. The
// storage engine writes version 2 volumes (BlockWriter) since issue 18;
// this writer is kept unchanged so tests and tools can make filesets as
// the previous release did. series must be sorted by ID (bytes.Compare)
// without duplicates; blockSize is in milliseconds.
//
// The fileset becomes visible to List only when its checkpoint is written,
// after every other file and the directory have been fsynced. On any error
// Write removes what it wrote (checkpoint first), so a failed Write leaves
// no complete fileset; leftovers it could not remove are incomplete and
// ResolveIncomplete moves them aside. Write never touches other filesets, and
// returns ErrExists if id is already complete on disk. Concurrent Writes of
// the same id are not supported.
func Write(fsys vfs.FS, root string, id ID, blockSize int64, series []Series) error {
	if err := write(fsys, root, id, blockSize, series); err != nil {
		return fmt.Errorf("write fileset %v: %w", id, err)
	}
	return nil
}

func write(fsys vfs.FS, root string, id ID, blockSize int64, series []Series) error {
	if err := checkInput(id, blockSize, series); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	dir := ShardDir(root, id.Namespace, id.Shard)
	if err := ensureDir(fsys, root, dir); err != nil {
		return err
	}
	cpPath := filePath(root, id, kindCheckpoint)
	switch _, err := readCheckpoint(fsys, cpPath, id); {
	case err == nil:
		return ErrExists
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, ErrCorrupt):
		// A torn checkpoint from a crashed attempt: the fileset is
		// incomplete, so it is ours to replace. Drop the checkpoint before
		// rewriting the files it would describe.
		if err := fsys.Remove(cpPath); err != nil {
			return fmt.Errorf("remove stale checkpoint: %w", err)
		}
	default:
		return err
	}

	w := fileWriter{fs: fsys, root: root, id: id}
	if err := w.writeAll(blockSize, series); err != nil {
		w.cleanup()
		return err
	}
	return nil
}

func checkInput(id ID, blockSize int64, series []Series) error {
	if err := id.validate(); err != nil {
		return err
	}
	if blockSize <= 0 {
		return fmt.Errorf("block size %d must be positive", blockSize)
	}
	for i, s := range series {
		if i > 0 && bytes.Compare(series[i-1].ID, s.ID) >= 0 {
			return fmt.Errorf("series %d (%q) not after series %d (%q): input must be sorted without duplicates",
				i, s.ID, i-1, series[i-1].ID)
		}
		if len(s.Data) > maxSeriesSize {
			return fmt.Errorf("series %q: payload of %d bytes exceeds %d", s.ID, len(s.Data), maxSeriesSize)
		}
		if s.Samples < 0 || s.Samples > math.MaxUint32 {
			return fmt.Errorf("series %q: sample count %d out of range", s.ID, s.Samples)
		}
	}
	return nil
}

// ensureDir creates the shard directory and makes its creation durable by
// fsyncing the parents it may have added.
func ensureDir(fsys vfs.FS, root, dir string) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	for _, d := range []string{filepath.Dir(dir), root} {
		if err := fsys.SyncDir(d); err != nil {
			return fmt.Errorf("sync directory: %w", err)
		}
	}
	return nil
}

// fileWriter writes the files of one fileset and remembers which ones it
// created, for cleanup after an error.
type fileWriter struct {
	fs      vfs.FS
	root    string
	id      ID
	created []fileKind
}

func (w *fileWriter) writeAll(blockSize int64, series []Series) error {
	entries := make([]entry, len(series))
	var (
		pages []pageRef
		dg    digest
		err   error
	)
	dg.data, err = w.writeFile(kindData, func(out io.Writer) error {
		pages, err = writeData(out, series, entries)
		return err
	})
	if err != nil {
		return err
	}
	dg.index, err = w.writeFile(kindIndex, func(out io.Writer) error {
		return writeIndex(out, series, entries, pages)
	})
	if err != nil {
		return err
	}
	in := info{id: w.id, blockSize: blockSize, seriesCount: uint64(len(series)), pageCount: uint64(len(pages))}
	for i, e := range entries {
		in.sampleCount += uint64(series[i].Samples)
		in.payloadBytes += uint64(e.size)
	}
	if dg.info, err = w.writeBytes(kindInfo, encodeInfo(in)); err != nil {
		return err
	}
	dgSum, err := w.writeBytes(kindDigest, encodeDigest(dg))
	if err != nil {
		return err
	}
	// Every file and its directory entry must be durable before the
	// checkpoint can claim the fileset is complete.
	dir := ShardDir(w.root, w.id.Namespace, w.id.Shard)
	if err := w.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	if _, err := w.writeBytes(kindCheckpoint, encodeCheckpoint(checkpoint{id: w.id, digest: dgSum})); err != nil {
		return err
	}
	if err := w.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory after checkpoint: %w", err)
	}
	return nil
}

func (w *fileWriter) writeBytes(kind fileKind, b []byte) (fileSum, error) {
	return w.writeFile(kind, func(out io.Writer) error {
		_, err := out.Write(b[:len(b)-4]) // the checksumming writer re-adds the trailer
		return err
	})
}

// writeFile creates one file, lets body fill it through a buffered writer
// that computes the CRC32C of everything written, appends that CRC as the
// trailer for all files but data, fsyncs and closes.
func (w *fileWriter) writeFile(kind fileKind, body func(io.Writer) error) (fileSum, error) {
	path := filePath(w.root, w.id, kind)
	f, err := w.fs.Create(path)
	if err != nil {
		return fileSum{}, fmt.Errorf("create %s file: %w", kind, err)
	}
	w.created = append(w.created, kind)
	sw := &sumWriter{w: bufio.NewWriterSize(f, 256<<10)}
	err = body(sw)
	if err == nil && kind != kindData {
		_, err = sw.Write(binary.LittleEndian.AppendUint32(nil, sw.crc))
	}
	if err == nil {
		err = sw.w.Flush()
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
	return fileSum{size: sw.n, crc: sw.crc}, nil
}

// cleanup removes the files of a failed Write, checkpoint first, ignoring
// errors: whatever survives has no valid checkpoint and is incomplete.
func (w *fileWriter) cleanup() {
	for i := len(w.created) - 1; i >= 0; i-- {
		_ = w.fs.Remove(filePath(w.root, w.id, w.created[i]))
	}
}

// sumWriter counts and checksums what passes through it.
type sumWriter struct {
	w   *bufio.Writer
	crc uint32
	n   int64
}

func (s *sumWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.crc = crc32.Update(s.crc, castagnoli, p[:n])
	s.n += int64(n)
	return n, err
}

// writeData writes a version 1 data file: the header, then the pages of
// series (see writePages).
func writeData(out io.Writer, series []Series, entries []entry) ([]pageRef, error) {
	var hdr []byte
	hdr = appendHeader(hdr, magicData)
	if _, err := out.Write(hdr); err != nil {
		return nil, err
	}
	pages, _, err := writePages(out, series, entries, int64(headerSize))
	return pages, err
}

// writePages packs payloads back to back into pages of about
// targetPageSize uncompressed bytes, compresses each page on its own and
// writes it, the first at offset (absolute, in the data file). A payload
// never straddles two pages. It fills entries with each series' location
// and checksum and returns the page table and the offset after the last
// page.
func writePages(out io.Writer, series []Series, entries []entry, offset int64) ([]pageRef, int64, error) {
	var (
		pages []pageRef
		page  = make([]byte, 0, targetPageSize)
		comp  []byte
	)
	flush := func() error {
		comp = compressPage(page, comp[:0])
		if _, err := out.Write(comp); err != nil {
			return err
		}
		pages = append(pages, pageRef{offset: offset, clen: uint32(len(comp)), ulen: uint32(len(page)), crc: crc32c(comp)})
		offset += int64(len(comp))
		page = page[:0]
		return nil
	}
	for i, s := range series {
		if len(page) > 0 && len(page)+len(s.Data) > targetPageSize {
			if err := flush(); err != nil {
				return nil, 0, err
			}
		}
		entries[i] = entry{
			page:     uint32(len(pages)),
			off:      uint32(len(page)),
			size:     uint32(len(s.Data)),
			samples:  uint32(s.Samples),
			checksum: xxhash.Sum64(s.Data),
			kind:     payloadKind(s.Data),
		}
		page = append(page, s.Data...)
	}
	if len(series) > 0 {
		if err := flush(); err != nil {
			return nil, 0, err
		}
	}
	return pages, offset, nil
}
