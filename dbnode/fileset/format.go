package fileset

import (
	"encoding/binary"
	"fmt"
	"github.com/tessera-tsdb/tessera/internal/decbuf"
	"hash/crc32"
)

// formatVersion is written into every file of a per-shard (version 1)
// fileset; blockVersion into every file of a per-block (version 2) volume.
// Readers reject other versions rather than guess.
const (
	formatVersion = 1
	blockVersion  = 2
	// blockIndexVersion is the version written into the index of a
	// per-block volume: 4 since each series entry records its kind
	// (floats only, or holding native histograms), so a reader can tell a
	// selection holds histograms before reading any payload. Version 3
	// (zstd-compressed sections, about a fifth of the bytes of version 2's
	// raw sections) is the same without the kind. Readers accept 2, 3 and
	// 4; the other files of the volume stay at blockVersion.
	blockIndexVersion = 4
	// indexCompressed is the first index version with compressed sections.
	indexCompressed = 3
)

// Magic numbers, one per file, so a file swapped for another kind is caught
// before its fields are trusted.
var (
	magicInfo       = [4]byte{'T', 'S', 'F', 'I'}
	magicIndex      = [4]byte{'T', 'S', 'F', 'X'}
	magicData       = [4]byte{'T', 'S', 'F', 'D'}
	magicDigest     = [4]byte{'T', 'S', 'F', 'G'}
	magicCheckpoint = [4]byte{'T', 'S', 'F', 'C'}
)

// headerSize is magic + version, the start of every file.
const headerSize = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func appendHeader(b []byte, magic [4]byte) []byte {
	return appendHeaderVersion(b, magic, formatVersion)
}

func appendHeaderVersion(b []byte, magic [4]byte, version uint32) []byte {
	b = append(b, magic[:]...)
	return binary.LittleEndian.AppendUint32(b, version)
}

// seal appends the CRC32C of b to b: the trailer of info, index, digest
// and checkpoint files.
func seal(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32c(b))
}

// unseal checks the trailer, magic and version of a whole small file and
// returns the bytes between header and trailer.
func unseal(path string, b []byte, magic [4]byte) ([]byte, error) {
	return unsealVersion(path, b, magic, formatVersion)
}

func unsealVersion(path string, b []byte, magic [4]byte, version uint32) ([]byte, error) {
	if len(b) < headerSize+4 {
		return nil, fmt.Errorf("%s: %w: truncated (%d bytes)", path, ErrCorrupt, len(b))
	}
	body, trailer := b[:len(b)-4], b[len(b)-4:]
	if got, want := crc32c(body), binary.LittleEndian.Uint32(trailer); got != want {
		return nil, fmt.Errorf("%s: %w: checksum mismatch (computed %08x, stored %08x)", path, ErrCorrupt, got, want)
	}
	if [4]byte(body[:4]) != magic {
		return nil, fmt.Errorf("%s: %w: bad magic %q", path, ErrCorrupt, body[:4])
	}
	if v := binary.LittleEndian.Uint32(body[4:8]); v != version {
		return nil, fmt.Errorf("%s: %w: unsupported format version %d", path, ErrCorrupt, v)
	}
	return body[headerSize:], nil
}

// decoder reads little-endian fields from a byte slice and remembers the
// first short read, so decoding code checks once at the end.
type decoder struct{ decbuf.Buf }

func newDecoder(b []byte) decoder { return decoder{decbuf.Buf{B: b, Fail: truncated}} }

func truncated(what string) error { return fmt.Errorf("truncated reading %s", what) }

// done reports a short read or trailing garbage.
func (d *decoder) done() error {
	if d.Err != nil {
		return d.Err
	}
	if len(d.B) != 0 {
		return fmt.Errorf("%d unexpected trailing bytes", len(d.B))
	}
	return nil
}
