package hints

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Segment file layout; docs/format/hints.md describes it byte by byte.
const (
	segMagic      = "TSHQ"
	segVersion    = 1
	segHeaderSize = 20 // magic[4] version:u32 seq:u64 crc32c(previous 16 bytes):u32
	segPrefix     = "hints-"
	segSuffix     = ".log"
	// recordMin is the smallest record payload: created:u64, an empty
	// namespace, and the two counts of an empty SERIES_V1 payload.
	recordMin = 8 + 1 + 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadHeader marks a segment whose header is torn or corrupt: it holds
// no readable record.
var errBadHeader = errors.New("bad hint segment header")

func segName(seq uint64) string { return fmt.Sprintf("%s%020d%s", segPrefix, seq, segSuffix) }

func parseSegName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	seq, err := strconv.ParseUint(name[len(segPrefix):len(name)-len(segSuffix)], 10, 64)
	return seq, err == nil
}

func appendSegHeader(b []byte, seq uint64) []byte {
	start := len(b)
	b = append(b, segMagic...)
	b = binary.LittleEndian.AppendUint32(b, segVersion)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// parseSegHeader checks a segment header. A torn or corrupt one wraps
// errBadHeader; an intact header of another version is a different
// error: a newer Tessera wrote the file, which must be left alone.
func parseSegHeader(b []byte) (uint64, error) {
	if len(b) < segHeaderSize {
		return 0, fmt.Errorf("%w: %d bytes, want %d", errBadHeader, len(b), segHeaderSize)
	}
	if string(b[:4]) != segMagic {
		return 0, fmt.Errorf("%w: magic %q", errBadHeader, b[:4])
	}
	if got, want := binary.LittleEndian.Uint32(b[16:]), crc32.Checksum(b[:16], castagnoli); got != want {
		return 0, fmt.Errorf("%w: checksum %08x, want %08x", errBadHeader, got, want)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != segVersion {
		return 0, fmt.Errorf("unsupported hint segment version %d (this build reads %d)", v, segVersion)
	}
	return binary.LittleEndian.Uint64(b[8:]), nil
}

// appendRecord appends one framed record (the commit log's frame: length,
// CRC32-C, payload) holding samples of namespace ns, hinted at created.
func appendRecord(dst, scratch []byte, created time.Time, ns string, samples []storage.Sample) (out, scratchOut []byte) {
	p := scratch[:0]
	p = binary.LittleEndian.AppendUint64(p, uint64(created.UnixMilli()))
	p = binary.AppendUvarint(p, uint64(len(ns)))
	p = append(p, ns...)
	p = rpc.AppendSamples(p, samples)
	return commitlog.AppendFrame(dst, p), p
}

// Record is one hinted write: the samples one replica did not
// acknowledge, in the order they were written.
type Record struct {
	Created   time.Time
	Namespace string
	// Samples alias the queue's read buffer: valid until the next call
	// to Next.
	Samples []storage.Sample
	// Size is the record's size on disk, frame included.
	Size int64
}

// decodeRecord parses a record payload (its checksum already checked).
// It never panics on any input.
func decodeRecord(p []byte, dst []storage.Sample) (Record, []storage.Sample, error) {
	var r Record
	if len(p) < recordMin {
		return r, dst, fmt.Errorf("record of %d bytes, want at least %d", len(p), recordMin)
	}
	r.Created = time.UnixMilli(int64(binary.LittleEndian.Uint64(p)))
	off := 8
	l, n := binary.Uvarint(p[off:])
	if n <= 0 || l > uint64(len(p)-off-n) {
		return r, dst, fmt.Errorf("record namespace: bad length")
	}
	off += n
	r.Namespace = string(p[off : off+int(l)])
	off += int(l)
	out, err := rpc.DecodeSamples(p[off:], dst[:0])
	if err != nil {
		return r, dst, fmt.Errorf("record samples: %w", err)
	}
	r.Samples = out
	return r, out, nil
}
