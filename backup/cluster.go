package backup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/thanos-io/objstore"

	"github.com/tessera-tsdb/tessera/placement"
)

// Node HTTP paths of snapshots and uploads (served by dbnode/node).
const (
	SnapshotPath      = "/api/v1/admin/snapshot"
	SnapshotsPath     = "/api/v1/admin/snapshots"
	UploadPath        = "/api/v1/admin/backup/upload"
	BackupStatusPath  = "/api/v1/status/backup"
	RestoreStatusPath = "/api/v1/status/restore"
	placementPath     = "/api/v1/services/tessera/placement"
)

// maxErrorBody bounds how much of a failed node answer an error quotes.
const maxErrorBody = 4 << 10

// UploadRequest asks a node to upload shards of one of its snapshots.
type UploadRequest struct {
	// BucketConfig is the objstore bucket YAML (it may hold secrets: it
	// is never logged; send it over HTTPS off loopback).
	BucketConfig string   `json:"bucketConfig"`
	Snapshot     string   `json:"snapshot"`
	Shards       []uint32 `json:"shards"`
	// BytesPerSecond bounds this node's upload (0: unbounded).
	BytesPerSecond int64 `json:"bytesPerSecond"`
	Concurrency    int   `json:"concurrency"`
	// Previous is the bucket's latest complete backup, if any: the node
	// references its parts of unchanged sealed volumes without reading
	// them (UploadOptions.Previous).
	Previous string `json:"previous,omitempty"`
}

// UploadLine is one line of the upload's NDJSON answer: progress lines,
// then one line with Done and Shards, or Error.
type UploadLine struct {
	Progress *Progress    `json:"progress,omitempty"`
	Shards   []ShardEntry `json:"shards,omitempty"`
	Done     bool         `json:"done,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// CreateOptions configure a cluster-wide backup.
type CreateOptions struct {
	// ID names the backup; running Create again with the same ID resumes
	// it (the nodes' snapshots of the first run are reused when they
	// still exist, and parts already in the bucket are not uploaded).
	ID           string
	BucketConfig []byte
	// Placement is the cluster's; each shard is uploaded from one of its
	// AVAILABLE owners that answers /health.
	Placement placement.Placement
	// Client talks to the nodes (credentials, TLS); Scheme is http or https.
	Client *http.Client
	Scheme string
	// BytesPerSecond bounds each node's upload; Concurrency its parallel
	// parts.
	BytesPerSecond int64
	Concurrency    int
	// Progress is called with each node's progress lines.
	Progress func(node string, p Progress)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Create backs up the whole cluster: it picks one healthy AVAILABLE owner
// per shard (spreading shards over the owners), has each chosen node take
// a snapshot and upload its chosen shards, and writes the manifest last.
// A failed run leaves no manifest; run it again with the same ID.
func Create(ctx context.Context, b objstore.Bucket, o CreateOptions) (*Manifest, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Scheme == "" {
		o.Scheme = "http"
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	p := o.Placement
	if p.NumShards == 0 || len(p.Instances) == 0 {
		return nil, fmt.Errorf("backup %s: empty placement", o.ID)
	}
	if _, err := ReadManifest(ctx, b, o.ID); err == nil {
		return nil, fmt.Errorf("backup %s exists already (pick another --id)", o.ID)
	} else if !errors.Is(err, ErrNoBackup) {
		return nil, err
	}
	started := o.Now()
	if err := MarkInProgress(ctx, b, o.ID, started); err != nil {
		return nil, fmt.Errorf("backup %s: %w", o.ID, err)
	}
	plan, err := choose(ctx, o, p)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", o.ID, err)
	}
	previous := latestID(ctx, b)
	var (
		mu      sync.Mutex
		entries []ShardEntry
		errs    []error
		wg      sync.WaitGroup
		total   Progress
	)
	for _, in := range p.Instances {
		shards := plan[in.ID]
		if len(shards) == 0 {
			continue
		}
		wg.Go(func() {
			e, pr, err := backupNode(ctx, o, in, shards, previous)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", in.ID, err))
				return
			}
			entries = append(entries, e...)
			total.Parts += pr.Parts
			total.Uploaded += pr.Uploaded
			total.Skipped += pr.Skipped
			total.Reused += pr.Reused
			total.BytesUploaded += pr.BytesUploaded
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("backup %s incomplete (run it again with --id %s to resume): %w", o.ID, o.ID, err)
	}
	m := &Manifest{FormatVersion: FormatVersion, ID: o.ID, StartedMs: started.UnixMilli(), PlacementVersion: p.Version,
		NumShards: p.NumShards, ReplicaFactor: p.ReplicaFactor, Shards: entries, Previous: previous}
	summarizeManifest(m)
	m.Totals.ReusedObjects = total.Reused
	m.Totals.UploadedObjects, m.Totals.UploadedBytes = total.Uploaded, total.BytesUploaded
	m.FinishedMs = o.Now().UnixMilli()
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := WriteManifest(ctx, b, m); err != nil {
		return nil, err
	}
	if err := ClearInProgress(ctx, b, o.ID); err != nil {
		return m, fmt.Errorf("backup %s complete; clearing its in-progress mark failed (prune waits for its grace): %w", o.ID, err)
	}
	return m, nil
}

// latestID is the newest complete backup in the bucket ("" when there is
// none or the bucket cannot be listed: the nodes then read every block,
// which costs time, never correctness).
func latestID(ctx context.Context, b objstore.Bucket) string {
	ms, err := List(ctx, b)
	if err != nil || len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1].ID
}

// summarizeManifest fills namespaces, time range and totals from the
// shards' parts.
func summarizeManifest(m *Manifest) {
	ns := map[string]int64{}
	m.MinTime, m.MaxTime = 0, 0
	first := true
	for _, s := range m.Shards {
		for _, o := range s.Objects {
			m.Totals.Objects++
			m.Totals.Bytes += o.Size
			m.Totals.Samples += int64(o.Samples)
			if _, ok := ns[o.Namespace]; !ok || o.BlockSize > 0 {
				ns[o.Namespace] = max(ns[o.Namespace], o.BlockSize)
			}
			if o.Kind != KindBlock {
				continue
			}
			if first || o.BlockStart < m.MinTime {
				m.MinTime = o.BlockStart
			}
			if first || o.BlockStart+o.BlockSize > m.MaxTime {
				m.MaxTime = o.BlockStart + o.BlockSize
			}
			first = false
		}
	}
	m.Namespaces = nil
	for name, bs := range ns {
		m.Namespaces = append(m.Namespaces, NamespaceInfo{Name: name, BlockSize: bs})
	}
	sort.Slice(m.Namespaces, func(i, j int) bool { return m.Namespaces[i].Name < m.Namespaces[j].Name })
}

// choose gives every shard to one AVAILABLE owner that answers /health,
// the one with the fewest shards so far (ties: the lower ID), so the
// upload spreads over the cluster.
func choose(ctx context.Context, o CreateOptions, p placement.Placement) (map[string][]uint32, error) {
	healthy := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, in := range p.Instances {
		wg.Go(func() {
			ok := in.HTTPEndpoint != "" && probe(ctx, o.Client, o.Scheme+"://"+in.HTTPEndpoint+"/health") == nil
			mu.Lock()
			healthy[in.ID] = ok
			mu.Unlock()
		})
	}
	wg.Wait()
	owners := placement.IndexOwners(p)
	plan := map[string][]uint32{}
	var orphans []uint32
	for s := range p.NumShards {
		best := ""
		for _, ow := range owners.Owners(s) {
			if ow.State != placement.Available || !healthy[ow.InstanceID] {
				continue
			}
			if best == "" || len(plan[ow.InstanceID]) < len(plan[best]) ||
				(len(plan[ow.InstanceID]) == len(plan[best]) && ow.InstanceID < best) {
				best = ow.InstanceID
			}
		}
		if best == "" {
			orphans = append(orphans, s)
			continue
		}
		plan[best] = append(plan[best], s)
	}
	if len(orphans) > 0 {
		return nil, fmt.Errorf("%d shards (first %d) have no AVAILABLE owner answering /health with an httpEndpoint in the placement", len(orphans), orphans[0])
	}
	return plan, nil
}

func probe(ctx context.Context, c *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// backupNode has one node snapshot (or reuse the snapshot of a run being
// resumed) and upload its shards, then deletes the snapshot.
func backupNode(ctx context.Context, o CreateOptions, in placement.Instance, shards []uint32, previous string) ([]ShardEntry, Progress, error) {
	base := o.Scheme + "://" + in.HTTPEndpoint
	body, _ := json.Marshal(map[string]string{"id": o.ID})
	code, msg, err := call(ctx, o.Client, http.MethodPost, base+SnapshotPath, body)
	if err != nil {
		return nil, Progress{}, fmt.Errorf("snapshot: %w", err)
	}
	if code != http.StatusOK && code != http.StatusConflict { // 409: kept from the run being resumed
		return nil, Progress{}, fmt.Errorf("snapshot: %d %s", code, msg)
	}
	req, _ := json.Marshal(UploadRequest{BucketConfig: string(o.BucketConfig), Snapshot: o.ID, Shards: shards,
		BytesPerSecond: o.BytesPerSecond, Concurrency: o.Concurrency, Previous: previous})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+UploadPath, bytes.NewReader(req))
	if err != nil {
		return nil, Progress{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := o.Client.Do(hr)
	if err != nil {
		return nil, Progress{}, fmt.Errorf("upload: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, Progress{}, fmt.Errorf("upload: %s %s", resp.Status, strings.TrimSpace(string(b)))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		var l UploadLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, Progress{}, fmt.Errorf("upload: bad answer line: %w", err)
		}
		if l.Progress != nil && o.Progress != nil {
			o.Progress(in.ID, *l.Progress)
		}
		if l.Error != "" {
			return nil, Progress{}, fmt.Errorf("upload: %s", l.Error)
		}
		if l.Done {
			got := map[uint32]bool{}
			for _, e := range l.Shards {
				got[e.Shard] = true
			}
			for _, s := range shards {
				if !got[s] {
					return nil, Progress{}, fmt.Errorf("upload: the node's answer lacks shard %d", s)
				}
			}
			// The snapshot served its purpose; a failure to delete it
			// only costs disk until the operator deletes it.
			_, _, _ = call(ctx, o.Client, http.MethodDelete, base+SnapshotsPath+"/"+o.ID, nil)
			var p Progress
			if l.Progress != nil {
				p = *l.Progress
			}
			return l.Shards, p, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, Progress{}, fmt.Errorf("upload: %w", err)
	}
	return nil, Progress{}, errors.New("upload: the node's answer ended before the result (node stopped?)")
}

func call(ctx context.Context, c *http.Client, method, url string, body []byte) (int, string, error) {
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// FetchPlacement reads the placement from a node's HTTP API.
func FetchPlacement(ctx context.Context, c *http.Client, baseURL string) (placement.Placement, error) {
	code, body, err := call(ctx, c, http.MethodGet, strings.TrimSuffix(baseURL, "/")+placementPath, nil)
	if err != nil {
		return placement.Placement{}, fmt.Errorf("read placement from %s: %w", baseURL, err)
	}
	if code != http.StatusOK {
		return placement.Placement{}, fmt.Errorf("read placement from %s: %d %s", baseURL, code, body)
	}
	var p placement.Placement
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return placement.Placement{}, fmt.Errorf("read placement from %s: %w", baseURL, err)
	}
	return p, nil
}

// RestoreState is one node's restore report as `tessera backup restore`
// shows it.
type RestoreState struct {
	Node    string        `json:"node"`
	Enabled bool          `json:"enabled"`
	Report  RestoreReport `json:"report"`
	Pending int           `json:"pendingShards"` // INITIALIZING in the placement
	Err     string        `json:"error,omitempty"`
}

// FetchRestoreStatus asks every node of the placement for its restore report.
func FetchRestoreStatus(ctx context.Context, c *http.Client, scheme string, p placement.Placement) []RestoreState {
	if scheme == "" {
		scheme = "http"
	}
	out := make([]RestoreState, len(p.Instances))
	var wg sync.WaitGroup
	for i, in := range p.Instances {
		out[i].Node = in.ID
		for _, s := range in.Shards {
			if s.State == placement.Initializing {
				out[i].Pending++
			}
		}
		wg.Go(func() {
			code, body, err := call(ctx, c, http.MethodGet, scheme+"://"+in.HTTPEndpoint+RestoreStatusPath, nil)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("%d %s", code, body)
			}
			if err == nil {
				var st struct {
					Enabled bool          `json:"enabled"`
					Report  RestoreReport `json:"report"`
				}
				if err = json.Unmarshal([]byte(body), &st); err == nil {
					out[i].Enabled, out[i].Report = st.Enabled, st.Report
				}
			}
			if err != nil {
				out[i].Err = err.Error()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b RestoreState) int { return strings.Compare(a.Node, b.Node) })
	return out
}
