package hints

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Segment file layout; docs/format/hints.md describes it byte by byte.
const (
	segMagic = "TSHQ"
	// segVersion is the version this build writes: its records are the
	// commit log's version 2 frames (marker, length, a checksum over the
	// segment's seq, the length and the payload), so a reader finds the
	// record after a damaged one. Version 1 segments (length and CRC32-C
	// of the payload) are still read.
	segVersion    = 2
	segHeaderSize = 20 // magic[4] version:u32 seq:u64 crc32c(previous 16 bytes):u32
	segPrefix     = "hints-"
	segSuffix     = ".log"
	// recordMin is the smallest record payload: created:u64, an empty
	// namespace, and the two counts of an empty SERIES_V1 payload.
	recordMin = 8 + 1 + 2
)

func segName(seq uint64) string { return fmt.Sprintf("%s%020d%s", segPrefix, seq, segSuffix) }

func parseSegName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	seq, err := strconv.ParseUint(name[len(segPrefix):len(name)-len(segSuffix)], 10, 64)
	return seq, err == nil
}

func appendSegHeader(b []byte, seq uint64) []byte {
	return commitlog.AppendFileHeader(b, segMagic, segVersion, seq)
}

// parseSegHeader checks a segment header (commitlog.ParseFileHeader) and
// returns its seq and version (1 or 2).
func parseSegHeader(b []byte) (uint64, uint32, error) {
	return commitlog.ParseFileHeader(b, segMagic, segVersion, "hint segment")
}

// appendRecord appends one record holding samples of namespace ns, hinted
// at created, in a version 2 frame that commitlog.SealFrame completes once
// the segment it goes to (whose seq the checksum covers) is known.
func appendRecord(dst []byte, created time.Time, ns string, samples []storage.Sample) []byte {
	dst = commitlog.OpenFrame(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(created.UnixMilli()))
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	dst = append(dst, ns...)
	return rpc.AppendSamples(dst, samples)
}

// kindFlag set in a record's created field marks a record of a kind other
// than floats: a kind byte follows created. Records without it are float
// records (SERIES_V1), as every record written before histograms. A
// build older than the flag reads created as a time before 1970 and
// drops the record (counted too old, or corrupt when the payload does not
// decode as floats); it checks the age before delivering, so it never
// delivers histograms as floats.
const kindFlag = uint64(1) << 63

// Record kinds after kindFlag.
const (
	// kindHistograms: the payload is HISTOGRAMS_V1 (docs/format/rpc.md).
	// Written by builds before batch records; read, never written.
	kindHistograms = 1
	// kindBatch: a batch of every kind, the floats' SERIES_V1 payload
	// (after its length, uvarint) then HISTOGRAMS_V1.
	kindBatch = 2
)

// createdOf is the created time in a record's first 8 bytes, of any kind.
func createdOf(v uint64) time.Time { return time.UnixMilli(int64(v &^ kindFlag)) }

// appendBatchRecord appends one record holding batch b of namespace ns,
// hinted at created, as appendRecord. A batch of floats alone is a float
// record, which every build reads; one with histograms is a batch record.
// It fails on a histogram the payload encoding refuses.
func appendBatchRecord(dst []byte, created time.Time, ns string, b storage.Batch) ([]byte, error) {
	if len(b.Histograms) == 0 {
		return appendRecord(dst, created, ns, b.Floats), nil
	}
	start := len(dst)
	dst = commitlog.OpenFrame(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(created.UnixMilli())|kindFlag)
	dst = append(dst, kindBatch)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	dst = append(dst, ns...)
	out, err := rpc.AppendBatch(dst, b)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

// Record is one hinted write: the samples one replica did not
// acknowledge, in the order they were written.
type Record struct {
	Created   time.Time
	Namespace string
	// Samples are the caller's (they alias no buffer the queue reuses).
	Samples []storage.Sample
	// Histograms are the record's native histogram samples: a record
	// holds one write's share of every kind.
	Histograms []storage.HistogramSample
	// Size is the record's size on disk, frames included.
	Size int64

	seq    uint64 // segment
	off    int64  // offset of the first frame in it
	frames int    // records read into this one (NextBatch)
}

// decodeRecord parses a record payload (its checksum already checked).
// It never panics on any input.
func decodeRecord(p []byte, dst []storage.Sample) (Record, []storage.Sample, error) {
	var r Record
	if len(p) < recordMin {
		return r, dst, fmt.Errorf("record of %d bytes, want at least %d", len(p), recordMin)
	}
	created := binary.LittleEndian.Uint64(p)
	off := 8
	kind := 0
	if created&kindFlag != 0 {
		created &^= kindFlag
		kind = int(p[off])
		off++
		if kind != kindHistograms && kind != kindBatch {
			return r, dst, fmt.Errorf("record of unknown kind %d (a newer build wrote it)", kind)
		}
	}
	r.Created = createdOf(created)
	l, n := binary.Uvarint(p[off:])
	if n <= 0 || l > uint64(len(p)-off-n) {
		return r, dst, fmt.Errorf("record namespace: bad length")
	}
	off += n
	r.Namespace = string(p[off : off+int(l)])
	off += int(l)
	var err error
	switch kind {
	case 0:
		out, err := rpc.DecodeSamples(p[off:], dst[:0])
		if err != nil {
			return r, dst, fmt.Errorf("record samples: %w", err)
		}
		r.Samples, dst = out, out
		return r, dst, nil
	case kindHistograms:
		r.Histograms, err = rpc.DecodeHistograms(p[off:], nil)
	case kindBatch:
		var b storage.Batch
		b, err = rpc.DecodeBatch(p[off:], dst[:0])
		r.Samples, r.Histograms = b.Floats, b.Histograms
		if len(b.Floats) > 0 {
			dst = b.Floats
		}
	}
	if err != nil {
		return r, dst, fmt.Errorf("record of kind %d: %w", kind, err)
	}
	if len(r.Histograms) == 0 {
		return r, dst, fmt.Errorf("record histograms: empty")
	}
	return r, dst, nil
}
