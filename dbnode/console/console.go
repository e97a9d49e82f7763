// Package console is the operator's console every node serves at /: one
// page (embedded HTML, CSS and JavaScript, no build step) and the JSON it
// polls, GET /api/v1/console/cluster, which gathers on the node what the
// page would otherwise fetch from every instance itself (the browser
// cannot: other nodes are other origins, and some answer only with
// credentials): the placement with each instance's shards by state, each
// instance's /health and /ready probed with a short timeout, this node's
// hint queues and repair status, and its ingest and query rates.
//
// Placement changes are not made here: the page calls the placement API
// (placement/placementhttp) directly, behind the admin role.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/placement"
)

// Path is the JSON endpoint the page polls.
const Path = "/api/v1/console/cluster"

// AssetPrefix is where the page's static files are served.
const AssetPrefix = "/console/"

//go:embed static
var static embed.FS

// Options say where the console reads what it shows.
type Options struct {
	// Self is this node's instance ID.
	Self string
	// Placement reads the placement from its store (etcd).
	Placement func(ctx context.Context) (placement.Placement, error)
	// Cached is the placement this node last saw, used (and said so) when
	// the store does not answer; nil or a nil result: none.
	Cached func() *placement.Placement
	// Local serves this node's own routes (/api/v1/status/hints,
	// /api/v1/status/repair), called in-process so the console needs no
	// credentials of its own and shows a route only if it exists.
	Local *http.ServeMux
	// Counters sums this node's counters by metric name, for the rates.
	Counters func() (map[string]float64, error)
	// Scheme is how other instances' HTTP endpoints are probed: "http"
	// (default) or "https".
	Scheme string
	// ProbeClient probes other instances; nil: a client with
	// ProbeTimeout.
	ProbeClient *http.Client
	// ProbeTimeout bounds each instance probe (default 1s) and the
	// placement read (4x).
	ProbeTimeout time.Duration
	// Insecure lists this node's surfaces open beyond loopback without
	// authentication (security.allowInsecure): the page shows a banner.
	Insecure []InsecureSurface
	// Now is the clock for the rates; nil: time.Now.
	Now func() time.Time
	// SampleEvery is how often Run reads Counters for the rates
	// (default DefaultSampleEvery).
	SampleEvery time.Duration
}

// Console serves the page and its JSON.
type Console struct {
	opts Options
	ring rateRing
}

// New builds a console.
func New(opts Options) *Console {
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = time.Second
	}
	if opts.Scheme == "" {
		opts.Scheme = "http"
	}
	if opts.ProbeClient == nil {
		opts.ProbeClient = &http.Client{Timeout: opts.ProbeTimeout}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = DefaultSampleEvery
	}
	return &Console{opts: opts}
}

// Register mounts GET / (the page), GET /console/ (its assets) and the
// JSON endpoint.
func (c *Console) Register(mux *http.ServeMux) {
	sub, _ := fs.Sub(static, "static") // the directory is embedded: cannot fail
	files := http.FileServerFS(sub)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			http.Error(w, "console page missing from the binary: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	})
	mux.Handle("GET "+AssetPrefix, http.StripPrefix(strings.TrimSuffix(AssetPrefix, "/"), files))
	mux.HandleFunc("GET "+Path, c.serveCluster)
}

// Cluster is the JSON the page polls.
type Cluster struct {
	Self string `json:"self"`
	Time string `json:"time"`
	// Placement is what the instances are drawn from; PlacementSource is
	// "etcd" or "cache" (etcd did not answer: PlacementError says why).
	Placement       *PlacementView `json:"placement"`
	PlacementSource string         `json:"placementSource"`
	PlacementError  string         `json:"placementError,omitempty"`
	Instances       []InstanceView `json:"instances"`
	// Hints is this node's GET /api/v1/status/hints, as it answers.
	Hints json.RawMessage `json:"hints,omitempty"`
	// Repair is GET /api/v1/status/repair when the node has it (200);
	// RepairError says why not.
	Repair      json.RawMessage `json:"repair,omitempty"`
	RepairError string          `json:"repairError,omitempty"`
	// Backup and Restore are this node's backup upload (GET
	// /api/v1/status/backup) and restore (GET /api/v1/status/restore)
	// progress, when the node has them.
	Backup  json.RawMessage `json:"backup,omitempty"`
	Restore json.RawMessage `json:"restore,omitempty"`
	Rates   Rates           `json:"rates"`
	// InsecureSurfaces is Options.Insecure: what this node serves beyond
	// loopback without authentication.
	InsecureSurfaces []InsecureSurface `json:"insecureSurfaces,omitempty"`
}

// InsecureSurface is one listener open to anyone who reaches it.
type InsecureSurface struct {
	Surface string `json:"surface"` // http, rpc, etcd-client, etcd-peer
	Listen  string `json:"listen"`
}

// PlacementView is the placement's header.
type PlacementView struct {
	Version       int64  `json:"version"`
	NumShards     uint32 `json:"numShards"`
	ReplicaFactor int    `json:"replicaFactor"`
	// Moving counts INITIALIZING copies cluster-wide.
	Moving int `json:"moving"`
}

// InstanceView is one instance as the page draws it.
type InstanceView struct {
	ID             string `json:"id"`
	IsolationGroup string `json:"isolationGroup"`
	Zone           string `json:"zone"`
	Weight         uint32 `json:"weight"`
	Endpoint       string `json:"endpoint"`
	HTTPEndpoint   string `json:"httpEndpoint"`
	Leaving        bool   `json:"leaving"`
	// Counts by state name: INITIALIZING, AVAILABLE, LEAVING.
	Counts map[string]int `json:"counts"`
	// Shards is one character per shard ID 0..NumShards-1: '.' not held,
	// 'I' INITIALIZING, 'A' AVAILABLE, 'L' LEAVING (4 KiB for 4096 shards).
	Shards string `json:"shards"`
	// Sources names, for INITIALIZING copies, the instance each streams
	// from, with how many shards.
	Sources map[string]int `json:"sources,omitempty"`
	Health  Probe          `json:"health"`
	Ready   Probe          `json:"ready"`
}

// Probe is one HTTP probe of an instance.
type Probe struct {
	// Checked is false when the instance has no HTTP endpoint.
	Checked bool `json:"checked"`
	OK      bool `json:"ok"`
	// Status is the HTTP status (0: no answer).
	Status int `json:"status,omitempty"`
	// Reason is /ready's reason (bootstrap progress) or the probe's error.
	Reason string   `json:"reason,omitempty"`
	Damage []string `json:"damage,omitempty"`
	// Bootstrap is /ready's bootstrap progress while shards bootstrap
	// (bootstrap.Progress as JSON), for the page to draw.
	Bootstrap json.RawMessage `json:"bootstrap,omitempty"`
	Millis    int64           `json:"millis"`
}

func (c *Console) serveCluster(w http.ResponseWriter, r *http.Request) {
	out := c.gather(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

func (c *Console) gather(ctx context.Context) Cluster {
	out := Cluster{Self: c.opts.Self, Time: c.opts.Now().UTC().Format(time.RFC3339), Instances: []InstanceView{},
		InsecureSurfaces: c.opts.Insecure}
	p, src, perr := c.placement(ctx)
	out.PlacementSource = src
	if perr != nil {
		out.PlacementError = perr.Error()
	}
	if p != nil {
		out.Placement = &PlacementView{Version: p.Version, NumShards: p.NumShards,
			ReplicaFactor: p.ReplicaFactor, Moving: placement.MovingShards(*p)}
		out.Instances = instanceViews(*p)
		c.probeAll(ctx, out.Instances)
	}
	if b, status, err := c.local(ctx, "/api/v1/status/hints"); err == nil && status == http.StatusOK {
		out.Hints = b
	}
	switch b, status, err := c.local(ctx, "/api/v1/status/repair"); {
	case err != nil:
		out.RepairError = err.Error()
	case status != http.StatusOK:
		out.RepairError = fmt.Sprintf("GET /api/v1/status/repair answered %d", status)
	default:
		out.Repair = b
	}
	if b, status, err := c.local(ctx, "/api/v1/status/backup"); err == nil && status == http.StatusOK {
		out.Backup = b
	}
	if b, status, err := c.local(ctx, "/api/v1/status/restore"); err == nil && status == http.StatusOK {
		out.Restore = b
	}
	out.Rates = c.ring.rates()
	return out
}

func (c *Console) placement(ctx context.Context) (*placement.Placement, string, error) {
	var err error
	if c.opts.Placement != nil {
		ctx, cancel := context.WithTimeout(ctx, 4*c.opts.ProbeTimeout)
		defer cancel()
		var p placement.Placement
		if p, err = c.opts.Placement(ctx); err == nil {
			return &p, "etcd", nil
		}
		err = fmt.Errorf("read placement: %w", err)
	} else {
		err = errors.New("no placement store")
	}
	if c.opts.Cached != nil {
		if p := c.opts.Cached(); p != nil {
			return p, "cache", err
		}
	}
	return nil, "none", err
}

// instanceViews sorts instances by isolation group, then ID, so the page
// draws each group together.
func instanceViews(p placement.Placement) []InstanceView {
	out := make([]InstanceView, 0, len(p.Instances))
	for _, in := range p.Instances {
		v := InstanceView{ID: in.ID, IsolationGroup: in.IsolationGroup, Zone: in.Zone, Weight: in.Weight,
			Endpoint: in.Endpoint, HTTPEndpoint: in.HTTPEndpoint, Leaving: in.Leaving,
			Counts: map[string]int{}}
		cells := []byte(strings.Repeat(".", int(p.NumShards)))
		for _, s := range in.Shards {
			if s.ID < p.NumShards {
				cells[s.ID] = stateLetter(s.State)
			}
			if s.State == placement.Initializing && s.SourceID != "" {
				if v.Sources == nil {
					v.Sources = map[string]int{}
				}
				v.Sources[s.SourceID]++
			}
		}
		counts := in.CountByState()
		for st := placement.Initializing; st <= placement.Leaving; st++ {
			v.Counts[st.String()] = counts[st]
		}
		v.Shards = string(cells)
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].IsolationGroup != out[j].IsolationGroup {
			return out[i].IsolationGroup < out[j].IsolationGroup
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func stateLetter(s placement.ShardState) byte {
	switch s {
	case placement.Initializing:
		return 'I'
	case placement.Available:
		return 'A'
	case placement.Leaving:
		return 'L'
	}
	return '?'
}

// probeAll asks every instance's /health and /ready at once, each bounded
// by the probe timeout, so one dead instance costs the page one timeout.
func (c *Console) probeAll(ctx context.Context, ins []InstanceView) {
	var wg sync.WaitGroup
	for i := range ins {
		if ins[i].HTTPEndpoint == "" {
			ins[i].Health.Reason = "no HTTP endpoint in the placement"
			ins[i].Ready.Reason = ins[i].Health.Reason
			continue
		}
		base := c.opts.Scheme + "://" + ins[i].HTTPEndpoint
		wg.Go(func() { ins[i].Health = c.probe(ctx, base+"/health") })
		wg.Go(func() { ins[i].Ready = c.probe(ctx, base+"/ready") })
	}
	wg.Wait()
}

func (c *Console) probe(ctx context.Context, url string) Probe {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	start := time.Now()
	pr := Probe{Checked: true}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		pr.Reason = err.Error()
		return pr
	}
	resp, err := c.opts.ProbeClient.Do(req)
	pr.Millis = time.Since(start).Milliseconds()
	if err != nil {
		pr.Reason = err.Error()
		return pr
	}
	defer resp.Body.Close()
	pr.Status = resp.StatusCode
	pr.OK = resp.StatusCode == http.StatusOK
	var body struct {
		Reason    string          `json:"reason"`
		Damage    []string        `json:"damage"`
		Bootstrap json.RawMessage `json:"bootstrap"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &body) == nil {
		pr.Reason, pr.Damage, pr.Bootstrap = body.Reason, body.Damage, body.Bootstrap
	} else if !pr.OK {
		pr.Reason = strings.TrimSpace(string(b))
	}
	return pr
}

// local calls one of this node's own GET routes in-process; a route the
// node does not have is an error naming it.
func (c *Console) local(ctx context.Context, path string) (json.RawMessage, int, error) {
	if c.opts.Local == nil {
		return nil, 0, errors.New("not available")
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	h, pattern := c.opts.Local.Handler(req)
	if pattern == "" {
		return nil, 0, fmt.Errorf("not available: this node has no %s", path)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusOK && !json.Valid(rec.Body.Bytes()) {
		return nil, rec.Code, fmt.Errorf("%s: answer is not JSON", path)
	}
	return json.RawMessage(rec.Body.Bytes()), rec.Code, nil
}
