package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"

	"github.com/tessera-tsdb/tessera/backup"
	"github.com/tessera-tsdb/tessera/dbnode/snapshot"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Paths of the snapshot and backup endpoints (backup names them for the
// CLI). Everything under /api/v1/admin needs the admin role (httpauth:
// unclassified routes do); the status routes are read.
const (
	SnapshotPath     = backup.SnapshotPath
	SnapshotsPath    = backup.SnapshotsPath
	UploadPath       = backup.UploadPath
	BackupStatusPath = backup.BackupStatusPath
	RestoreStatus    = backup.RestoreStatusPath
)

// BackupStatus is this node's current or last upload, for the console
// and `tessera backup create`'s progress.
type BackupStatus struct {
	Running   bool            `json:"running"`
	Snapshot  string          `json:"snapshot,omitempty"`
	Shards    int             `json:"shards"`
	Progress  backup.Progress `json:"progress"`
	StartedMs int64           `json:"startedMs,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// backupAdmin serves the snapshot and upload endpoints of one node.
type backupAdmin struct {
	n  *Node
	db *storage.Database

	mu     sync.Mutex
	status BackupStatus
	busy   bool
	gauges backupGauges
}

// backupGauges export the current (or last) upload's progress as
// tessera_backup_upload_*, updated with every part (as the status route),
// not only when the upload ends.
type backupGauges struct {
	running, parts, done, uploaded, skipped, bytes tally.Gauge
}

func newBackupGauges(s tally.Scope) backupGauges {
	return backupGauges{running: s.Gauge("running"), parts: s.Gauge("parts"), done: s.Gauge("parts_done"),
		uploaded: s.Gauge("parts_uploaded"), skipped: s.Gauge("parts_skipped"), bytes: s.Gauge("uploaded_bytes")}
}

// set publishes st; called with a.mu held, so the gauges move in the
// status' order.
func (g backupGauges) set(st BackupStatus) {
	running := 0.0
	if st.Running {
		running = 1
	}
	g.running.Update(running)
	g.parts.Update(float64(st.Progress.Parts))
	g.done.Update(float64(st.Progress.Done))
	g.uploaded.Update(float64(st.Progress.Uploaded))
	g.skipped.Update(float64(st.Progress.Skipped))
	g.bytes.Update(float64(st.Progress.BytesUploaded))
}

func (n *Node) registerBackup(db *storage.Database, restorer *backup.Restorer) {
	a := &backupAdmin{n: n, db: db, gauges: newBackupGauges(n.scope.SubScope("backup").SubScope("upload"))}
	a.gauges.set(a.status)
	mux := n.api.Mux()
	mux.HandleFunc("POST "+SnapshotPath, a.createSnapshot)
	mux.HandleFunc("GET "+SnapshotsPath, a.listSnapshots)
	mux.HandleFunc("DELETE "+SnapshotsPath+"/{id}", a.deleteSnapshot)
	mux.HandleFunc("POST "+UploadPath, a.upload)
	mux.HandleFunc("GET "+BackupStatusPath, func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		st := a.status
		a.mu.Unlock()
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET "+RestoreStatus, func(w http.ResponseWriter, _ *http.Request) {
		if restorer == nil {
			writeJSON(w, http.StatusOK, map[string]any{"enabled": false})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"enabled": true, "report": restorer.Report()})
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func (a *backupAdmin) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID string `json:"id"`
	}
	if r.ContentLength != 0 {
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("bad JSON body: %w", err))
			return
		}
	}
	if req.ID != "" {
		if err := snapshot.ValidID(req.ID); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
	}
	var version int64
	if m := a.n.topo.Get(); m != nil {
		version = m.Placement.Version
	}
	meta, err := snapshot.Create(a.db, a.n.cfg.DataDir, snapshot.Options{ID: req.ID, NodeID: a.n.cfg.ID, PlacementVersion: version})
	switch {
	case errors.Is(err, fs.ErrExist):
		writeError(w, http.StatusConflict, err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	a.n.log.Info("snapshot taken", "id", meta.ID, "blocks", len(meta.Blocks), "unflushed_shards", len(meta.Unflushed), "took_ms", meta.TookMs)
	writeJSON(w, http.StatusOK, summarize(meta))
}

// snapshotSummary is a snapshot without its block list.
type snapshotSummary struct {
	ID               string `json:"id"`
	NodeID           string `json:"nodeID"`
	CreatedMs        int64  `json:"createdMs"`
	PlacementVersion int64  `json:"placementVersion"`
	NumShards        uint32 `json:"numShards"`
	Blocks           int    `json:"blocks"`
	UnflushedShards  int    `json:"unflushedShards"`
	TookMs           int64  `json:"tookMs"`
}

func summarize(m snapshot.Meta) snapshotSummary {
	return snapshotSummary{ID: m.ID, NodeID: m.NodeID, CreatedMs: m.CreatedMs, PlacementVersion: m.PlacementVersion,
		NumShards: m.NumShards, Blocks: len(m.Blocks), UnflushedShards: len(m.Unflushed), TookMs: m.TookMs}
}

func (a *backupAdmin) listSnapshots(w http.ResponseWriter, _ *http.Request) {
	ms, err := snapshot.List(a.n.cfg.DataDir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	out := make([]snapshotSummary, 0, len(ms))
	for _, m := range ms {
		out = append(out, summarize(m))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *backupAdmin) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	err := snapshot.Delete(a.n.cfg.DataDir, r.PathValue("id"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, err)
	case err != nil:
		writeError(w, http.StatusBadRequest, err)
	default:
		writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("id")})
	}
}

// upload streams NDJSON: a progress line at most every second, then the
// result. The upload stops when the caller goes away (its context).
func (a *backupAdmin) upload(w http.ResponseWriter, r *http.Request) {
	var req backup.UploadRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("bad JSON body: %w", err))
		return
	}
	if req.Concurrency <= 0 {
		req.Concurrency = 4
	}
	if req.BytesPerSecond < 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("bytesPerSecond must be >= 0"))
		return
	}
	s, err := snapshot.OpenID(a.n.cfg.DataDir, req.Snapshot)
	if errors.Is(err, os.ErrNotExist) {
		writeError(w, http.StatusNotFound, err)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	defer s.Close()
	b, err := backup.NewBucket([]byte(req.BucketConfig))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	defer b.Close()
	var prev *backup.Manifest
	if req.Previous != "" {
		// Only an optimisation: without it every block is read again.
		if prev, err = backup.ReadManifest(r.Context(), b, req.Previous); err != nil {
			a.n.log.Warn("backup upload: previous backup unreadable, every sealed block is read again", "previous", req.Previous, "err", err)
			prev = nil
		}
	}
	a.mu.Lock()
	if a.busy {
		a.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Errorf("an upload of snapshot %s is running on this node", a.status.Snapshot))
		return
	}
	a.busy = true
	a.status = BackupStatus{Running: true, Snapshot: req.Snapshot, Shards: len(req.Shards), StartedMs: time.Now().UnixMilli()}
	a.gauges.set(a.status)
	a.mu.Unlock()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	var wmu sync.Mutex
	send := func(l backup.UploadLine) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	}
	var last time.Time
	var lmu sync.Mutex
	entries, p, err := backup.Upload(r.Context(), b, s, backup.UploadOptions{
		Shards: req.Shards, BytesPerSecond: req.BytesPerSecond, Concurrency: req.Concurrency, Previous: prev,
		Progress: func(p backup.Progress) {
			a.mu.Lock()
			if p.Done > a.status.Progress.Done || a.status.Progress.Parts == 0 {
				a.status.Progress = p
				a.gauges.set(a.status)
			}
			a.mu.Unlock()
			lmu.Lock()
			due := time.Since(last) >= time.Second
			if due {
				last = time.Now()
			}
			lmu.Unlock()
			if due {
				send(backup.UploadLine{Progress: &p})
			}
		},
	})
	a.mu.Lock()
	a.busy = false
	a.status.Running = false
	a.status.Progress = p
	if err != nil {
		a.status.Error = err.Error()
	}
	a.gauges.set(a.status)
	a.mu.Unlock()
	if err != nil {
		a.n.log.Error("backup upload failed", "snapshot", req.Snapshot, "err", err)
		send(backup.UploadLine{Progress: &p, Error: err.Error()})
		return
	}
	a.n.log.Info("backup upload done", "snapshot", req.Snapshot, "shards", len(req.Shards), "uploaded", p.Uploaded, "skipped", p.Skipped, "reused", p.Reused, "bytes", p.BytesUploaded)
	send(backup.UploadLine{Progress: &p, Shards: entries, Done: true})
}

// openRestore builds the backup bootstrapper from bootstrap.restore, or
// nil when none is configured. A missing manifest fails start-up, naming
// the field; a backup of another shard count is re-sharded as it loads.
func (n *Node) openRestore(ctx context.Context, db *storage.Database) (*backup.Restorer, func(), error) {
	rc := n.cfg.Bootstrap.Restore
	if !rc.Enabled() {
		return nil, nil, nil
	}
	conf, err := os.ReadFile(rc.BucketConfigFile)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap.restore.bucketConfigFile: %w", err)
	}
	b, err := backup.NewBucket(conf)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap.restore.bucketConfigFile %s: %w", rc.BucketConfigFile, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := backup.ReadManifest(ctx, b, rc.Backup)
	if err != nil {
		b.Close()
		return nil, nil, fmt.Errorf("bootstrap.restore.backup: %w", err)
	}
	r, err := backup.NewRestorer(b, m, uint32(n.cfg.Cluster.NumShards), restoreDB{db}, n.log.With("component", "restore"))
	if err != nil {
		b.Close()
		return nil, nil, fmt.Errorf("bootstrap.restore.backup: %w", err)
	}
	if r.Resharded() {
		n.log.Info("restore from backup enabled, into another shard count: every series is re-hashed, and each node reads every backup shard that can hold series of its shards",
			"backup", m.ID, "backup_shards", m.NumShards, "cluster_shards", n.cfg.Cluster.NumShards)
	} else {
		n.log.Info("restore from backup enabled: shards of a fresh cluster load from it", "backup", m.ID, "shards", len(m.Shards))
	}
	return r, func() { b.Close() }, nil
}

// restoreDB adapts storage to backup.RestoreDB.
type restoreDB struct{ db *storage.Database }

func (r restoreDB) LoadBlocks(ns string, blocks []storage.StreamedBlock) error {
	return r.db.LoadBlocks(ns, blocks)
}

func (r restoreDB) LoadStreams(ns string, shard uint32, series []storage.SeriesStream) (int, error) {
	return r.db.LoadStreams(ns, shard, series)
}
