package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/placement"
)

// rollupReader reads rollup namespaces for the PromQL API
// (promapi.RollupReader) through the cluster session: the windows of
// every shard from its owners at the read level, replicas' windows
// merged by End (client.Session.QueryRollup), as raw reads go through
// it. Only a backend without that read (none in a node today) falls back
// to this node's own storage, and then only when it owns every shard
// AVAILABLE, never a partial answer.
type rollupReader struct{ n *Node }

// clusterRollups is the backend's rollup read (client.Session has it).
type clusterRollups interface {
	QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.RollupSeries, error)
}

var errRollupNotReady = errors.New("rollup namespaces: storage is not open yet")

func (r rollupReader) QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.RollupSeries, error) {
	// The backend is served (an atomic store) after storage opened, so
	// seeing it makes n.db safe to read.
	b := r.n.state.Backend()
	if b == nil {
		return nil, errRollupNotReady
	}
	if cr, ok := b.(clusterRollups); ok {
		return cr.QueryRollup(ctx, ns, ms, start, end)
	}
	db := r.n.DB()
	if db == nil {
		return nil, errRollupNotReady
	}
	if r.n.topo != nil && !ownsEveryShard(r.n.topo.Get(), r.n.cfg.ID) {
		return nil, fmt.Errorf("namespace %q is a rollup: this node's backend reads rollups from its own storage only, and it does not own every shard AVAILABLE", ns)
	}
	return db.QueryRollup(ctx, ns, ms, start, end, storage.QueryOptions{})
}

// ScanRollup is promapi.RollupScanner: from this node's own storage
// (decoding and the caller's work on every core, one series' windows at
// a time) where the session would read only this node's storage too (a
// one-instance placement: the read level asks nothing of other
// replicas), else over what QueryRollup returns, one series after
// another.
func (r rollupReader) ScanRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, fn func(i int, rs storage.RollupSeries) error) error {
	// As QueryRollup: the backend served first makes n.db safe to read.
	if r.n.state.Backend() != nil && r.readsLocally() {
		if db := r.n.DB(); db != nil {
			return db.ScanRollup(ctx, ns, ms, start, end, storage.QueryOptions{}, fn)
		}
	}
	rs, err := r.QueryRollup(ctx, ns, ms, start, end)
	if err != nil {
		return err
	}
	for i, s := range rs {
		if err := fn(i, s); err != nil {
			return err
		}
	}
	return nil
}

// readsLocally reports whether a rollup read is answered by this node's
// storage alone: no placement (a backend without one), or one whose only
// instance is this node, as client.Session decides for raw reads.
func (r rollupReader) readsLocally() bool {
	if r.n.topo == nil {
		return true
	}
	m := r.n.topo.Get()
	return m != nil && m.Sole != "" && m.Sole == r.n.cfg.ID
}

// ownsEveryShard reports whether instance id holds every shard of m's
// placement AVAILABLE (one node, or RF equal to the node count): its own
// storage then holds the whole of every rollup.
func ownsEveryShard(m *client.Map, id string) bool {
	if m == nil {
		return false
	}
	if m.Sole != "" {
		return m.Sole == id
	}
	for sh := range m.Placement.NumShards {
		ok := false
		for _, o := range m.Owners.Owners(sh) {
			if o.InstanceID == id && o.State == placement.Available {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return m.Placement.NumShards > 0
}

// rollupResolutions maps each rollup namespace of the config to its
// resolution and the raw namespace at the root of its chain
// (promapi.Options.Rollups; config validation refused loops).
func rollupResolutions(nss []config.Namespace) map[string]promapi.Rollup {
	byName := map[string]config.Namespace{}
	for _, ns := range nss {
		byName[ns.Name] = ns
	}
	out := map[string]promapi.Rollup{}
	for _, ns := range nss {
		if !ns.IsRollup() {
			continue
		}
		root := ns
		for i := 0; root.IsRollup() && i <= len(nss); i++ {
			root = byName[root.RollupOf]
		}
		out[ns.Name] = promapi.Rollup{Resolution: ns.Resolution, Raw: root.Name}
	}
	return out
}

// remoteReadRollups are the rollups of the first namespace's chain
// (the one remote read answers without ?namespace=), for remote read's
// stitching (httpapi.Options.Rollups).
func remoteReadRollups(nss []config.Namespace) []httpapi.RollupNamespace {
	var out []httpapi.RollupNamespace
	byName := map[string]config.Namespace{}
	for _, ns := range nss {
		byName[ns.Name] = ns
	}
	for name, ru := range rollupResolutions(nss) {
		if ru.Raw != nss[0].Name {
			continue
		}
		ns := byName[name]
		out = append(out, httpapi.RollupNamespace{Name: name, Resolution: ns.Resolution, Retention: ns.Retention, BlockSize: ns.BlockSize})
	}
	return out
}

// NamespaceStatusPath serves each namespace's resolution, retention,
// bytes on disk and, for a rollup, its progress.
const NamespaceStatusPath = "/api/v1/status/namespaces"

// namespaceStatus is one namespace in NamespaceStatusPath's answer.
type namespaceStatus struct {
	Name       string `json:"name"`
	RollupOf   string `json:"rollupOf,omitempty"`
	Resolution string `json:"resolution,omitempty"` // rollups only
	Retention  string `json:"retention"`
	BlockSize  string `json:"blockSize"`
	DiskBytes  int64  `json:"diskBytes"`
	// Rollups only: the end of the newest source block rolled up since
	// start, how far behind now that is, volumes written and failures.
	RolledUpTo   *time.Time `json:"rolledUpTo,omitempty"`
	LagSeconds   *float64   `json:"lagSeconds,omitempty"`
	RollupBlocks int64      `json:"rollupBlocks,omitempty"`
	// BackfillCursor: every source block starting before it is rolled
	// up (persisted; a restart resumes there); Backfilled counts the
	// source blocks the backfill rolled up since start.
	BackfillCursor *time.Time `json:"backfillCursor,omitempty"`
	Backfilled     int64      `json:"backfilled,omitempty"`
	// Rederived: rollup blocks derived again from the source after
	// damage (at start, or a page failing its checksum on read).
	Rederived     int64  `json:"rederived,omitempty"`
	RollupErrors  int64  `json:"rollupErrors,omitempty"`
	DiskBytesNote string `json:"diskBytesError,omitempty"`
}

// namespaceStatuses describes every namespace of db.
func namespaceStatuses(db *storage.Database) []namespaceStatus {
	progress := map[string]storage.RollupStatus{}
	for _, st := range db.RollupStatuses() {
		progress[st.Namespace] = st
	}
	var out []namespaceStatus
	for _, ns := range db.Namespaces() {
		s := namespaceStatus{Name: ns.Name, RollupOf: ns.RollupOf, Retention: ns.Retention.String(), BlockSize: ns.BlockSize.String()}
		if b, err := db.NamespaceDiskBytes(ns.Name); err != nil {
			s.DiskBytesNote = err.Error()
		} else {
			s.DiskBytes = b
		}
		if ns.RollupOf != "" {
			s.Resolution = ns.Resolution.String()
			p := progress[ns.Name]
			s.RollupBlocks, s.RollupErrors, s.Backfilled, s.Rederived = p.Blocks, p.Errors, p.Backfilled, p.Rederived
			if !p.Cursor.IsZero() {
				c := p.Cursor
				s.BackfillCursor = &c
			}
			if !p.RolledUpTo.IsZero() {
				t, lag := p.RolledUpTo, p.Lag.Seconds()
				s.RolledUpTo, s.LagSeconds = &t, &lag
			}
		}
		out = append(out, s)
	}
	return out
}

// registerNamespaceStatus serves NamespaceStatusPath over db.
func (n *Node) registerNamespaceStatus(db *storage.Database) {
	n.api.Mux().HandleFunc("GET "+NamespaceStatusPath, func(w http.ResponseWriter, _ *http.Request) {
		b, err := json.Marshal(struct {
			Status string            `json:"status"`
			Data   []namespaceStatus `json:"data"`
		}{"success", namespaceStatuses(db)})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}
