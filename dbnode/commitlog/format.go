package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// File layout constants; see docs/format/commitlog.md.
const (
	fileMagic  = "TSCL"
	headerSize = 20 // magic[4] version:u32 seq:u64 crc32c(previous 16 bytes):u32
	filePrefix = "commitlog-"
	fileSuffix = ".db"

	// fileVersion is the version this build writes. Version 1 frames are
	// length:u32 crc32c(payload):u32; version 2 frames start with a
	// marker and checksum the length and the file's seq too, so that a
	// reader that lost its place (corruption) finds the next record by
	// searching for the marker and can trust what it finds. Version 3
	// frames are version 2's; its records end with a histogram section
	// (native histogram samples). A build that reads only up to 2 refuses
	// a version 3 file at Open instead of skipping its histograms.
	fileVersion       = 3
	frameHeaderSizeV1 = 8  // length:u32 crc32c(payload):u32
	frameHeaderSize   = 12 // marker[4] length:u32 crc32c(seq:u64 length:u32 payload):u32
)

// frameMarker starts every version 2 frame. Its bytes are rare in
// payloads (no small varint, no common float pattern), but replay never
// relies on that: a frame found by its marker must also pass its checksum.
const frameMarker = "\xd1\x7c\x5e\xa3"

// frameSum is the checksum of a version 2 frame: the file's seq and the
// frame's length are covered along with the payload, so a frame copied
// from another file or a bit flip in the length is caught like one in
// the payload.
func frameSum(seq uint64, payload []byte) uint32 {
	var pre [12]byte
	binary.LittleEndian.PutUint64(pre[:], seq)
	binary.LittleEndian.PutUint32(pre[8:], uint32(len(payload)))
	return crc32.Update(crc32.Checksum(pre[:], castagnoli), castagnoli, payload)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadHeader marks a file header that is torn or corrupt: the file
// holds no readable record (the commit log removes such a file on Open).
var ErrBadHeader = errors.New("bad file header")

var errBadHeader = ErrBadHeader

// fileName returns the base name of the file with sequence number seq.
// Zero padding keeps lexical and numeric order the same for people
// listing the directory; the code always sorts by the parsed number.
func fileName(seq uint64) string {
	return fmt.Sprintf("%s%020d%s", filePrefix, seq, fileSuffix)
}

// parseFileName returns the sequence number of a commit log file name.
func parseFileName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, filePrefix) || !strings.HasSuffix(name, fileSuffix) {
		return 0, false
	}
	seq, err := strconv.ParseUint(name[len(filePrefix):len(name)-len(fileSuffix)], 10, 64)
	if err != nil {
		return 0, false
	}
	return seq, true
}

func appendHeader(b []byte, seq uint64) []byte {
	return AppendFileHeader(b, fileMagic, fileVersion, seq)
}

// parseHeader checks a file header and returns its seq and version (1 or
// 2). A torn or corrupt header wraps errBadHeader; an intact header of an
// unknown version is a different, fatal error: the file was written by a
// newer Tessera and must not be truncated.
func parseHeader(b []byte) (seq uint64, version uint32, err error) {
	return ParseFileHeader(b, fileMagic, fileVersion, "commit log")
}

// FrameHeaderSize is the size of a version 2 frame's header: marker[4]
// length:u32 crc32c(seq:u64 length:u32 payload):u32. The client's hint
// queue (docs/format/hints.md) frames its records this way too and reads
// them back with FrameReader.
const FrameHeaderSize = frameHeaderSize

// OpenFrame appends the header of a version 2 frame whose payload the
// caller appends next, in place; SealFrame then fills in its length and
// checksum.
func OpenFrame(dst []byte) []byte {
	dst = append(dst, frameMarker...)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // length and checksum: SealFrame
}

// SealFrame fills in the length and checksum of the version 2 frame that
// starts at dst[start:] (OpenFrame's header, then the payload up to
// len(dst)), for a file whose header carries seq.
func SealFrame(dst []byte, start int, seq uint64) {
	payload := dst[start+frameHeaderSize:]
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+8:], frameSum(seq, payload))
}

// AppendFileHeader appends the 20-byte header the commit log and the hint
// queue (docs/format/hints.md) start their files with: magic[4]
// version:u32 seq:u64 crc32c(previous 16 bytes):u32.
func AppendFileHeader(b []byte, magic string, version uint32, seq uint64) []byte {
	start := len(b)
	b = append(b, magic[:4]...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// ParseFileHeader checks a header written by AppendFileHeader and returns
// its seq and version, from 1 to maxVersion. A torn or corrupt header
// wraps ErrBadHeader; an intact header of a later version is a different
// error naming what (a newer build wrote the file, which must be left
// alone).
func ParseFileHeader(b []byte, magic string, maxVersion uint32, what string) (seq uint64, version uint32, err error) {
	if len(b) < headerSize {
		return 0, 0, fmt.Errorf("%w: %d bytes, want %d", ErrBadHeader, len(b), headerSize)
	}
	if string(b[:4]) != magic {
		return 0, 0, fmt.Errorf("%w: magic %q", ErrBadHeader, b[:4])
	}
	if got, want := binary.LittleEndian.Uint32(b[16:]), crc32.Checksum(b[:16], castagnoli); got != want {
		return 0, 0, fmt.Errorf("%w: checksum %08x, want %08x", ErrBadHeader, got, want)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v < 1 || v > maxVersion {
		return 0, 0, fmt.Errorf("unsupported %s version %d (this build reads 1 to %d)", what, v, maxVersion)
	}
	return binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint32(b[4:]), nil
}

// FileSeqs lists the sequence numbers of the commit log files in dir,
// ascending (none when dir does not exist): what Open would replay.
func FileSeqs(fs vfs.FS, dir string) ([]uint64, error) {
	dirents, err := fs.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list commit log dir %s: %w", dir, err)
	}
	var seqs []uint64
	for _, de := range dirents {
		if seq, ok := parseFileName(de.Name()); ok && de.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}
