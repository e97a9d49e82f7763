// Package auxsnap keeps a node's exemplars and metric metadata across
// restarts: each store is written to a small checksummed snapshot file
// (docs/format/aux-snapshot.md) periodically and on graceful shutdown,
// and read back at start.
//
// These are auxiliary data (Prometheus keeps exemplars in memory only),
// so a snapshot is best effort: what arrived after the last one is lost
// by a crash. A damaged file costs only itself, from the damaged record
// on: the records before it are kept, the damage is reported, and the
// node starts all the same.
package auxsnap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Kind says what a snapshot file holds; it is its header's last byte.
type Kind byte

const (
	KindExemplars Kind = 'E'
	KindMetadata  Kind = 'M'
)

// magic starts every snapshot file; its last digit is the format version.
const magic = "TSXAUX01"

// maxRecord bounds one record's length: a damaged length field must not
// make the reader allocate gigabytes. Labels are bounded far below it.
const maxRecord = 16 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DamageError is a snapshot that could not be read whole: Kept records
// were read before the damage at Offset.
type DamageError struct {
	Offset int
	Kept   int
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("damaged at byte %d (%s): kept the %d records before it", e.Offset, e.Reason, e.Kept)
}

// EncodeExemplars is the snapshot file of items (oldest first).
func EncodeExemplars(items []exemplars.Item) []byte {
	b := header(KindExemplars)
	var p []byte
	for _, it := range items {
		p = p[:0]
		p = appendBytes(p, it.SeriesID)
		p = binary.AppendVarint(p, it.T)
		p = binary.LittleEndian.AppendUint64(p, math.Float64bits(it.V))
		p = binary.AppendUvarint(p, uint64(it.Labels.Len()))
		it.Labels.Range(func(l labels.Label) {
			p = appendBytes(p, []byte(l.Name))
			p = appendBytes(p, []byte(l.Value))
		})
		b = appendRecord(b, p)
	}
	return b
}

// EncodeMetadata is the snapshot file of records (metadata.Store.Snapshot).
func EncodeMetadata(rs []metadata.Record) []byte {
	b := header(KindMetadata)
	var p []byte
	for _, r := range rs {
		p = p[:0]
		p = appendBytes(p, []byte(r.Metric))
		p = appendBytes(p, []byte(r.Type))
		p = appendBytes(p, []byte(r.Help))
		p = appendBytes(p, []byte(r.Unit))
		b = appendRecord(b, p)
	}
	return b
}

// DecodeExemplars reads a snapshot of exemplars. On damage it returns the
// items before it and a *DamageError.
func DecodeExemplars(b []byte) ([]exemplars.Item, error) {
	var out []exemplars.Item
	err := records(b, KindExemplars, func(p []byte) error {
		var it exemplars.Item
		d := decoder{b: p}
		it.SeriesID = d.bytes()
		it.T = d.varint()
		it.V = math.Float64frombits(d.u64())
		n := d.uvarint()
		if n > uint64(len(p)) {
			return errors.New("label count past the record")
		}
		var lb labels.ScratchBuilder
		for range n {
			name, value := d.bytes(), d.bytes()
			lb.Add(string(name), string(value))
		}
		if d.err != nil {
			return d.err
		}
		if len(d.b) != 0 {
			return fmt.Errorf("%d bytes after the exemplar", len(d.b))
		}
		lb.Sort()
		it.Labels = lb.Labels()
		it.SeriesID = append([]byte(nil), it.SeriesID...)
		out = append(out, it)
		return nil
	})
	return out, err
}

// DecodeMetadata reads a snapshot of metadata, as DecodeExemplars.
func DecodeMetadata(b []byte) ([]metadata.Record, error) {
	var out []metadata.Record
	err := records(b, KindMetadata, func(p []byte) error {
		d := decoder{b: p}
		metric, typ, help, unit := d.bytes(), d.bytes(), d.bytes(), d.bytes()
		if d.err != nil {
			return d.err
		}
		if len(d.b) != 0 {
			return fmt.Errorf("%d bytes after the entry", len(d.b))
		}
		if len(metric) == 0 {
			return errors.New("entry without a metric name")
		}
		out = append(out, metadata.Record{Metric: string(metric),
			Entry: metadata.Entry{Type: model.MetricType(typ), Help: string(help), Unit: string(unit)}})
		return nil
	})
	return out, err
}

// Save writes data to path atomically (a crash leaves the old snapshot
// or the new one).
func Save(fsys vfs.FS, path string, data []byte) error {
	if err := vfs.WriteFileAtomic(fsys, path, data); err != nil {
		return fmt.Errorf("write snapshot %s: %w", path, err)
	}
	return nil
}

// Load reads the snapshot at path; a missing file is an empty snapshot
// (nil, nil).
func Load(fsys vfs.FS, path string) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	return b, nil
}

func header(k Kind) []byte { return append([]byte(magic), byte(k)) }

// appendRecord frames one record: uvarint length, payload, CRC-32C of
// the length and payload (big endian).
func appendRecord(b, p []byte) []byte {
	start := len(b)
	b = binary.AppendUvarint(b, uint64(len(p)))
	b = append(b, p...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// records calls fn with every record's payload, stopping at the first
// damaged one. An empty file is an empty snapshot.
func records(b []byte, k Kind, fn func([]byte) error) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) < len(magic)+1 || string(b[:len(magic)]) != magic {
		return &DamageError{Reason: "not a snapshot file of this version"}
	}
	if Kind(b[len(magic)]) != k {
		return &DamageError{Offset: len(magic), Reason: fmt.Sprintf("holds kind %q, want %q", b[len(magic)], byte(k))}
	}
	off, kept := len(magic)+1, 0
	for off < len(b) {
		n, w := binary.Uvarint(b[off:])
		if w <= 0 || n > maxRecord || uint64(len(b)-off-w) < n+4 {
			return &DamageError{Offset: off, Kept: kept, Reason: "bad or torn record length"}
		}
		end := off + w + int(n)
		if crc32.Checksum(b[off:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
			return &DamageError{Offset: off, Kept: kept, Reason: "checksum mismatch"}
		}
		if err := fn(b[off+w : end]); err != nil {
			return &DamageError{Offset: off, Kept: kept, Reason: err.Error()}
		}
		kept++
		off = end + 4
	}
	return nil
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads a record's fields; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = errors.New("truncated " + what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("length")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("timestamp")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail("value")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("string")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
