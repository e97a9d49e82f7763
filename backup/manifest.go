// Package backup moves snapshots of a cluster's shards to object storage
// and back: content-addressed parts (so a backup uploads only what no
// earlier backup stored), one manifest per backup written last (a backup
// without one is incomplete), verification of every checksum, retention
// that never deletes what a kept backup references, and the restore
// source the bootstrapper calls for the shards of a fresh cluster.
//
// Bucket layout (docs/format/backup.md):
//
//	objects/<first 2 hex>/<sha256 hex>   one part (dbnode/snapshot.EncodeBlock
//	                                     or EncodeUnflushed), named by its hash
//	backups/<id>/manifest.json           the backup: shard -> parts
package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/thanos-io/objstore"

	"github.com/tessera-tsdb/tessera/dbnode/snapshot"
)

// FormatVersion is the manifest format this release writes and reads.
const FormatVersion = 1

const (
	objectsDir = "objects"
	backupsDir = "backups"
	manifest   = "manifest.json"
)

// ObjectKey is where a part with this SHA-256 lives.
func ObjectKey(sum string) string { return path.Join(objectsDir, sum[:2], sum) }

// ManifestKey is where backup id's manifest lives.
func ManifestKey(id string) string { return path.Join(backupsDir, id, manifest) }

// Sum is the hex SHA-256 of a part: its name in the bucket.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Manifest describes one complete backup.
type Manifest struct {
	FormatVersion int    `json:"formatVersion"`
	ID            string `json:"id"`
	// StartedMs and FinishedMs bracket the backup (unix ms); every sample
	// acknowledged before StartedMs is in it.
	StartedMs        int64           `json:"startedMs"`
	FinishedMs       int64           `json:"finishedMs"`
	PlacementVersion int64           `json:"placementVersion"`
	NumShards        uint32          `json:"numShards"`
	ReplicaFactor    int             `json:"replicaFactor"`
	Namespaces       []NamespaceInfo `json:"namespaces"`
	// MinTime and MaxTime (unix ms) bound the flushed blocks' ranges;
	// unflushed parts hold samples up to StartedMs (and beyond it by the
	// namespaces' bufferFuture).
	MinTime int64        `json:"minTime"`
	MaxTime int64        `json:"maxTime"`
	Shards  []ShardEntry `json:"shards"`
	Totals  Totals       `json:"totals"`
	// Previous is the backup whose parts of unchanged sealed volumes this
	// one referenced without reading them ("": none).
	Previous string `json:"previous,omitempty"`
}

// NamespaceInfo is a namespace as backed up.
type NamespaceInfo struct {
	Name      string `json:"name"`
	BlockSize int64  `json:"blockSize"`
}

// Totals count a backup's parts.
type Totals struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	Samples int64 `json:"samples"` // flushed samples; unflushed ones are not counted
	// Uploaded are the parts this backup stored; the rest were in the
	// bucket already (an earlier backup, or the run this one resumed).
	UploadedObjects int   `json:"uploadedObjects"`
	UploadedBytes   int64 `json:"uploadedBytes"`
	// ReusedObjects were referenced from Previous without reading their
	// volume (a subset of the referenced ones).
	ReusedObjects int `json:"reusedObjects,omitempty"`
}

// ShardEntry is one shard of a backup: the replica it came from and its
// parts.
type ShardEntry struct {
	Shard    uint32      `json:"shard"`
	Source   string      `json:"source"`   // instance ID
	Snapshot string      `json:"snapshot"` // the source's snapshot ID
	Objects  []ObjectRef `json:"objects"`
}

// Kinds of part.
const (
	KindBlock     = "block"
	KindUnflushed = "unflushed"
)

// ObjectRef names one part of a shard.
type ObjectRef struct {
	Key        string `json:"key"`
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	BlockStart int64  `json:"blockStart,omitempty"`
	BlockSize  int64  `json:"blockSize,omitempty"`
	Series     int    `json:"series"`
	Samples    int    `json:"samples,omitempty"`
	// From names the sealed volume a block part was read from; nil for
	// unflushed parts and version 1 filesets.
	From *PartSource `json:"from,omitempty"`
}

// PartSource is the sealed volume a block part was read from: the node,
// the volume index and the digest its checkpoint holds (sizes and CRC32C
// of its files). Volumes are immutable once sealed and new data for a
// block goes to a new volume index, so the next backup finding the same
// node, namespace, shard, block, volume and digest references this part
// without reading the volume again.
type PartSource struct {
	Node       string `json:"node"`
	Volume     int    `json:"volume"`
	Checkpoint string `json:"checkpoint"`
}

// Validate checks what a restore relies on.
func (m *Manifest) Validate() error {
	if m.FormatVersion != FormatVersion {
		return fmt.Errorf("manifest %s: format version %d, this release reads %d", m.ID, m.FormatVersion, FormatVersion)
	}
	if m.NumShards == 0 {
		return fmt.Errorf("manifest %s: numShards is 0", m.ID)
	}
	seen := map[uint32]bool{}
	for _, s := range m.Shards {
		if s.Shard >= m.NumShards || seen[s.Shard] {
			return fmt.Errorf("manifest %s: shard %d out of range or listed twice", m.ID, s.Shard)
		}
		seen[s.Shard] = true
		for _, o := range s.Objects {
			if len(o.SHA256) != 64 || o.Key != ObjectKey(o.SHA256) {
				return fmt.Errorf("manifest %s: shard %d: object %q does not match its sha256", m.ID, s.Shard, o.Key)
			}
		}
	}
	return nil
}

// Shard returns the entry of a shard (false when the backup has none:
// the shard held no data).
func (m *Manifest) Shard(shard uint32) (ShardEntry, bool) {
	i := sort.Search(len(m.Shards), func(i int) bool { return m.Shards[i].Shard >= shard })
	if i < len(m.Shards) && m.Shards[i].Shard == shard {
		return m.Shards[i], true
	}
	return ShardEntry{}, false
}

// WriteManifest stores m; it is the last write of a backup.
func WriteManifest(ctx context.Context, b objstore.Bucket, m *Manifest) error {
	sort.Slice(m.Shards, func(i, j int) bool { return m.Shards[i].Shard < m.Shards[j].Shard })
	buf, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	if err := b.Upload(ctx, ManifestKey(m.ID), bytes.NewReader(buf)); err != nil {
		return fmt.Errorf("write manifest of backup %s: %w", m.ID, err)
	}
	return nil
}

// ErrNoBackup is returned for a backup ID with no manifest.
var ErrNoBackup = errors.New("no such backup (no manifest)")

// ReadManifest reads and validates backup id's manifest.
func ReadManifest(ctx context.Context, b objstore.Bucket, id string) (*Manifest, error) {
	if err := snapshot.ValidID(id); err != nil {
		return nil, fmt.Errorf("backup %w", err)
	}
	rc, err := b.Get(ctx, ManifestKey(id))
	if b.IsObjNotFoundErr(err) {
		return nil, fmt.Errorf("backup %s: %w", id, ErrNoBackup)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest of backup %s: %w", id, err)
	}
	defer rc.Close()
	buf, err := io.ReadAll(io.LimitReader(rc, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("read manifest of backup %s: %w", id, err)
	}
	var m Manifest
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, fmt.Errorf("manifest of backup %s: %w", id, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// List returns the complete backups in the bucket, oldest first.
func List(ctx context.Context, b objstore.Bucket) ([]*Manifest, error) {
	var ids []string
	err := b.Iter(ctx, backupsDir+"/", func(name string) error {
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(name, backupsDir+"/"), "/"))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	var out []*Manifest
	for _, id := range ids {
		m, err := ReadManifest(ctx, b, id)
		if errors.Is(err, ErrNoBackup) {
			continue // incomplete: written by a run that has not finished
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].StartedMs != out[j].StartedMs {
			return out[i].StartedMs < out[j].StartedMs
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
