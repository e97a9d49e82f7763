// Package snapshot takes an online, crash-consistent cut of one node's
// data and reads it back as portable per-shard parts for backups.
//
// A snapshot is a directory <dataDir>/snapshots/<id>/:
//
//	meta.json                 what the snapshot holds (written last)
//	data/<ns>/...             hard links to every fileset or volume file
//	                          serving a block when the snapshot was taken
//	unflushed.parts           every shard's in-memory samples, one
//	                          unflushed part (part.go) after another;
//	                          meta.json has each one's offset and size
//
// It is taken inside storage.Database.Freeze: the tick lock keeps flushes,
// expiry and volume retirement from changing the files or releasing
// memory while the links are made and memory is copied, and writes go on
// meanwhile (they never take that lock). Hard links cost no copy; the
// volumes they name are immutable, and a volume the node retires later
// stays readable through the link until the snapshot is deleted. The
// snapshot is built under a temporary name and renamed into place once
// meta.json is durable, so a crash leaves either no snapshot or a
// complete one (List removes leftovers of interrupted ones).
package snapshot

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Meta is a snapshot's meta.json.
type Meta struct {
	ID               string `json:"id"`
	NodeID           string `json:"nodeID"`
	CreatedMs        int64  `json:"createdMs"`
	PlacementVersion int64  `json:"placementVersion"`
	NumShards        uint32 `json:"numShards"`
	// TookMs is how long the cut held the tick lock.
	TookMs    int64            `json:"tookMs"`
	Blocks    []BlockEntry     `json:"blocks"`
	Unflushed []UnflushedEntry `json:"unflushed"`
}

// BlockEntry is one flushed block of one shard in the snapshot.
type BlockEntry struct {
	Namespace  string `json:"namespace"`
	Shard      uint32 `json:"shard"`
	BlockStart int64  `json:"blockStart"`
	BlockSize  int64  `json:"blockSize"`
	Version    int    `json:"version"` // 1: per-shard fileset, 2: section of a volume
	Volume     int    `json:"volume"`
}

// UnflushedEntry is one shard's in-memory samples in the snapshot.
type UnflushedEntry struct {
	Namespace string `json:"namespace"`
	Shard     uint32 `json:"shard"`
	Series    int    `json:"series"`
	Bytes     int64  `json:"bytes"`
	// File and Offset locate the part: Bytes at Offset of File (under the
	// snapshot). A snapshot of an earlier release has no File and a file
	// per shard (unflushed/<ns>/<shard>).
	File   string `json:"file,omitempty"`
	Offset int64  `json:"offset,omitempty"`
}

// Options name a new snapshot.
type Options struct {
	// ID names the snapshot; empty picks one from the time.
	ID               string
	NodeID           string
	PlacementVersion int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID checks a snapshot or backup ID: letters, digits, '.', '_', '-',
// at most 128 bytes, not starting with punctuation (no path tricks).
func ValidID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("id %q: want 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// Dir is where a node keeps its snapshots.
func Dir(dataDir string) string { return filepath.Join(dataDir, "snapshots") }

const (
	metaFile  = "meta.json"
	tmpPrefix = ".tmp-"
)

// unflushedPage bounds one ReadUnflushed call while copying memory.
const unflushedPage = 4 << 20

// Create takes a snapshot of db into Dir(dataDir)/<id>.
func Create(db *storage.Database, dataDir string, o Options) (Meta, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	start := now()
	if o.ID == "" {
		o.ID = start.UTC().Format("20060102T150405.000Z")
	}
	if err := ValidID(o.ID); err != nil {
		return Meta{}, fmt.Errorf("snapshot: %w", err)
	}
	root := Dir(dataDir)
	final := filepath.Join(root, o.ID)
	if _, err := os.Stat(final); err == nil {
		return Meta{}, fmt.Errorf("snapshot %s: %w", o.ID, fs.ErrExist)
	}
	tmp := filepath.Join(root, tmpPrefix+o.ID)
	if err := os.RemoveAll(tmp); err != nil {
		return Meta{}, fmt.Errorf("snapshot %s: clear leftover: %w", o.ID, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return Meta{}, fmt.Errorf("snapshot %s: %w", o.ID, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp)
		}
	}()
	m := Meta{ID: o.ID, NodeID: o.NodeID, CreatedMs: start.UnixMilli(), PlacementVersion: o.PlacementVersion, NumShards: db.NumShards()}
	var parts *os.File
	err := db.Freeze(func(blocks []storage.FrozenBlock) error {
		dataRoot := db.DataRoot()
		linked := map[string]bool{}
		for _, b := range blocks {
			for _, f := range b.Files {
				if linked[f] {
					continue
				}
				linked[f] = true
				rel, err := filepath.Rel(dataRoot, f)
				if err != nil {
					return err
				}
				dst := filepath.Join(tmp, "data", rel)
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					return err
				}
				if err := os.Link(f, dst); err != nil {
					if errors.Is(err, fs.ErrNotExist) && b.Version == 1 {
						continue // optional files of an old fileset
					}
					return fmt.Errorf("link %s: %w", f, err)
				}
			}
			m.Blocks = append(m.Blocks, BlockEntry{Namespace: b.Namespace, Shard: b.Shard, BlockStart: b.BlockStart,
				BlockSize: b.BlockSize, Version: b.Version, Volume: b.Fileset.Volume})
		}
		// Memory is copied with the tick lock still held, so nothing in it
		// is flushed (and released) between the links and the copy. Every
		// shard's part goes into one file, made durable once below: a
		// file and an fsync per shard held the lock for seconds on a
		// 4096-shard node.
		f, err := os.OpenFile(filepath.Join(tmp, unflushedFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		parts = f
		w := bufio.NewWriterSize(f, 1<<20)
		var off int64
		for _, ns := range db.Namespaces() {
			for shard := range db.NumShards() {
				e, b, err := copyUnflushed(db, ns.Name, shard)
				if err != nil {
					return err
				}
				if e.Series == 0 {
					continue
				}
				if _, err := w.Write(b); err != nil {
					return fmt.Errorf("write %s: %w", unflushedFile, err)
				}
				e.File, e.Offset = unflushedFile, off
				off += int64(len(b))
				m.Unflushed = append(m.Unflushed, e)
			}
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", unflushedFile, err)
		}
		m.TookMs = time.Since(start).Milliseconds()
		return nil
	})
	if parts != nil {
		// Durable before meta.json names it; outside the tick lock.
		serr := parts.Sync()
		cerr := parts.Close()
		if err == nil {
			if err = errors.Join(serr, cerr); err != nil {
				err = fmt.Errorf("sync %s: %w", unflushedFile, err)
			}
		}
	}
	if err != nil {
		return Meta{}, fmt.Errorf("snapshot %s: %w", o.ID, err)
	}
	if err := writeJSON(filepath.Join(tmp, metaFile), m); err != nil {
		return Meta{}, fmt.Errorf("snapshot %s: %w", o.ID, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return Meta{}, fmt.Errorf("snapshot %s: %w", o.ID, err)
	}
	ok = true
	if err := syncDir(root); err != nil {
		return Meta{}, fmt.Errorf("snapshot %s: %w", o.ID, err)
	}
	return m, nil
}

// unflushedPath is where snapshots of earlier releases kept a shard's
// unflushed part (one file each); unflushedFile holds them all now.
func unflushedPath(dir, ns string, shard uint32) string {
	return filepath.Join(dir, "unflushed", ns, strconv.FormatUint(uint64(shard), 10))
}

const unflushedFile = "unflushed.parts"

// copyUnflushed encodes one shard's in-memory samples as an unflushed part
// (nil when it has none).
func copyUnflushed(db *storage.Database, ns string, shard uint32) (UnflushedEntry, []byte, error) {
	e := UnflushedEntry{Namespace: ns, Shard: shard}
	var all []storage.SeriesStream
	var after []byte
	for {
		page, more, err := db.ReadUnflushed(ns, shard, after, unflushedPage)
		if err != nil {
			return e, nil, fmt.Errorf("copy memory of shard %d: %w", shard, err)
		}
		all = append(all, page...)
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(all) == 0 {
		return e, nil, nil
	}
	b := EncodeUnflushed(PartHeader{Namespace: ns, Shard: shard, NumShards: db.NumShards()}, all)
	e.Series, e.Bytes = len(all), int64(len(b))
	return e, b, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileSync(path, append(b, '\n'))
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// List returns the complete snapshots under Dir(dataDir), oldest first,
// and removes the leftovers of interrupted ones.
func List(dataDir string) ([]Meta, error) {
	root := Dir(dataDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []Meta
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
			continue
		}
		s, err := Open(filepath.Join(root, e.Name()))
		if err != nil {
			continue // not ours, or damaged: Open names it when asked
		}
		out = append(out, s.Meta)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedMs != out[j].CreatedMs {
			return out[i].CreatedMs < out[j].CreatedMs
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Delete removes a snapshot (its links; the node's own files stay).
func Delete(dataDir, id string) error {
	if err := ValidID(id); err != nil {
		return fmt.Errorf("delete snapshot: %w", err)
	}
	p := filepath.Join(Dir(dataDir), id)
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	return nil
}

// Snapshot is an open snapshot directory. It is safe for concurrent use;
// Close releases the volumes BlockPart opened.
type Snapshot struct {
	Dir  string
	Meta Meta

	mu sync.Mutex
	// vols are the volumes opened so far: a volume holds a section for
	// every shard of its block, and opening it reads its whole index and
	// builds its dictionary decoder, which per shard made a 4096-shard
	// node's backup 16k volume opens.
	vols map[fileset.BlockID]*openVolume
	// digests are the volumes' checkpoint digests read so far.
	digests map[fileset.BlockID]fileset.VolumeDigest
}

type openVolume struct {
	mu  sync.Mutex // OpenShard calls, one at a time
	v   *fileset.Volume
	err error
}

// volume opens (once) the volume id of the snapshot.
func (s *Snapshot) volume(id fileset.BlockID) *openVolume {
	s.mu.Lock()
	if s.vols == nil {
		s.vols = map[fileset.BlockID]*openVolume{}
	}
	ov := s.vols[id]
	if ov == nil {
		ov = &openVolume{}
		s.vols[id] = ov
		ov.mu.Lock() // opened below, outside s.mu
		s.mu.Unlock()
		ov.v, ov.err = fileset.OpenBlock(vfs.OS(), filepath.Join(s.Dir, "data"), id, fileset.OpenOptions{})
		ov.mu.Unlock()
		return ov
	}
	s.mu.Unlock()
	return ov
}

// Close releases the open volumes.
func (s *Snapshot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for id, ov := range s.vols {
		ov.mu.Lock()
		if ov.v != nil {
			errs = append(errs, ov.v.Close())
		}
		ov.mu.Unlock()
		delete(s.vols, id)
	}
	return errors.Join(errs...)
}

// Open reads a snapshot's meta.json.
func Open(dir string) (*Snapshot, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, fmt.Errorf("open snapshot %s: %w", dir, err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("open snapshot %s: meta.json: %w", dir, err)
	}
	return &Snapshot{Dir: dir, Meta: m}, nil
}

// OpenID opens snapshot id of the node whose data directory is dataDir.
func OpenID(dataDir, id string) (*Snapshot, error) {
	if err := ValidID(id); err != nil {
		return nil, fmt.Errorf("open snapshot: %w", err)
	}
	return Open(filepath.Join(Dir(dataDir), id))
}

// BlockPart reads one block of the snapshot as a block part, checking
// every page and payload checksum of the fileset on the way, and returns
// it with its series and sample counts.
func (s *Snapshot) BlockPart(e BlockEntry) (part []byte, series, samples int, err error) {
	root := filepath.Join(s.Dir, "data")
	var r *fileset.Reader
	id := fileset.ID{Namespace: e.Namespace, Shard: e.Shard, BlockStart: e.BlockStart, Volume: e.Volume}
	if e.Version == 1 {
		r, err = fileset.OpenWith(vfs.OS(), root, id, fileset.OpenOptions{})
	} else {
		ov := s.volume(fileset.BlockID{Namespace: e.Namespace, BlockStart: e.BlockStart, Volume: e.Volume})
		ov.mu.Lock()
		err = ov.err
		var ok bool
		if err == nil {
			r, ok, err = ov.v.OpenShard(e.Shard)
			if err == nil && !ok {
				err = fmt.Errorf("volume %d of block %d has no section for shard %d", e.Volume, e.BlockStart, e.Shard)
			}
		}
		ov.mu.Unlock()
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read block %d of shard %d (%s): %w", e.BlockStart, e.Shard, e.Namespace, err)
	}
	defer r.Close()
	counts := make([]int, 0, r.Len())
	if err := r.RangeIndex(func(_ []byte, _ uint64, _ int, n int) error {
		counts = append(counts, n)
		return nil
	}); err != nil {
		return nil, 0, 0, err
	}
	out := make([]fileset.Series, 0, len(counts))
	i := 0
	err = r.RangeData(func(id, data []byte) error {
		if i >= len(counts) {
			return fmt.Errorf("fileset %v: more data than index entries", r.ID())
		}
		out = append(out, fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...), Samples: counts[i]})
		samples += counts[i]
		i++
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read block %d of shard %d (%s): %w", e.BlockStart, e.Shard, e.Namespace, err)
	}
	h := PartHeader{Namespace: e.Namespace, Shard: e.Shard, NumShards: s.Meta.NumShards, BlockStart: e.BlockStart, BlockSize: e.BlockSize}
	return EncodeBlock(h, out), len(out), samples, nil
}

// VolumeDigest returns the checkpoint digest of the volume block e is a
// section of (false for a version 1 fileset, which has no volume). It
// reads the checkpoint only, once per volume: an incremental backup
// compares it with the digest its previous backup recorded for the part,
// to reference that part instead of reading the block again.
func (s *Snapshot) VolumeDigest(e BlockEntry) (fileset.VolumeDigest, bool, error) {
	if e.Version == 1 {
		return fileset.VolumeDigest{}, false, nil
	}
	id := fileset.BlockID{Namespace: e.Namespace, BlockStart: e.BlockStart, Volume: e.Volume}
	s.mu.Lock()
	d, ok := s.digests[id]
	s.mu.Unlock()
	if ok {
		return d, true, nil
	}
	d, err := fileset.ReadVolumeDigest(vfs.OS(), filepath.Join(s.Dir, "data"), id)
	if err != nil {
		return fileset.VolumeDigest{}, false, fmt.Errorf("block %d of shard %d (%s): %w", e.BlockStart, e.Shard, e.Namespace, err)
	}
	s.mu.Lock()
	if s.digests == nil {
		s.digests = map[fileset.BlockID]fileset.VolumeDigest{}
	}
	s.digests[id] = d
	s.mu.Unlock()
	return d, true, nil
}

// UnflushedPart reads one shard's in-memory samples as copied, checking
// the part's own checksum and layout.
func (s *Snapshot) UnflushedPart(e UnflushedEntry) ([]byte, error) {
	b, err := s.readUnflushed(e)
	if err != nil {
		return nil, fmt.Errorf("read unflushed part of shard %d (%s): %w", e.Shard, e.Namespace, err)
	}
	if _, _, err := DecodeUnflushed(b); err != nil {
		return nil, fmt.Errorf("unflushed part of shard %d (%s) in snapshot %s: %w", e.Shard, e.Namespace, s.Meta.ID, err)
	}
	return b, nil
}

func (s *Snapshot) readUnflushed(e UnflushedEntry) ([]byte, error) {
	if e.File == "" { // a snapshot of an earlier release: a file per shard
		return os.ReadFile(unflushedPath(s.Dir, e.Namespace, e.Shard))
	}
	if e.File != unflushedFile || e.Offset < 0 || e.Bytes < 0 {
		return nil, fmt.Errorf("meta.json: bad unflushed entry (file %q, offset %d, %d bytes)", e.File, e.Offset, e.Bytes)
	}
	f, err := os.Open(filepath.Join(s.Dir, e.File))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, e.Bytes)
	if _, err := f.ReadAt(b, e.Offset); err != nil {
		return nil, fmt.Errorf("%s: %d bytes at %d: %w", e.File, e.Bytes, e.Offset, err)
	}
	return b, nil
}
