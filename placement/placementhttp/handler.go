// Package placementhttp serves the placement over HTTP on every node, at
// /api/v1/services/tessera/placement, with the same operations and errors
// as the CLI: for dashboards and scripts that speak JSON, not etcd.
//
//	GET    /api/v1/services/tessera/placement                    the placement
//	POST   /api/v1/services/tessera/placement/init               {"instances":[...],"numShards":4096,"replicaFactor":3}
//	POST   /api/v1/services/tessera/placement                    add: {"instances":[...],"force":false}
//	DELETE /api/v1/services/tessera/placement/{id}[?force=true]  remove
//	POST   /api/v1/services/tessera/placement/replace            {"leaving":["id"],"instances":[...],"force":false}
//	POST   /api/v1/services/tessera/placement/mark-available     {"instance":"id","shards":[1,2]} (no shards: all)
//
// Errors are {"error": "..."} with 400 (bad request, invariant violated,
// unknown instance), 404 (no placement), 409 (CAS conflict, shards still
// moving, already exists) or 503 (etcd unreachable).
package placementhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
)

// Path is the placement's HTTP path.
const Path = "/api/v1/services/tessera/placement"

// Handler serves the placement operations over a store.
type Handler struct {
	Store   *placement.Store
	Timeout time.Duration
}

// Register mounts the routes on mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Path, h.wrap(h.get))
	mux.HandleFunc("POST "+Path+"/init", h.wrap(h.init))
	mux.HandleFunc("POST "+Path, h.wrap(h.add))
	mux.HandleFunc("DELETE "+Path+"/{id}", h.wrap(h.remove))
	mux.HandleFunc("POST "+Path+"/replace", h.wrap(h.replace))
	mux.HandleFunc("POST "+Path+"/mark-available", h.wrap(h.markAvailable))
}

// Instance is an instance as requests give it.
type Instance struct {
	ID             string `json:"id"`
	IsolationGroup string `json:"isolationGroup"`
	Zone           string `json:"zone"`
	Weight         uint32 `json:"weight"`
	Endpoint       string `json:"endpoint"`
	HTTPEndpoint   string `json:"httpEndpoint"`
}

func (i Instance) toPlacement() placement.Instance {
	w := i.Weight
	if w == 0 {
		w = 1
	}
	return placement.Instance{ID: i.ID, IsolationGroup: i.IsolationGroup, Zone: i.Zone, Weight: w,
		Endpoint: i.Endpoint, HTTPEndpoint: i.HTTPEndpoint}
}

func instances(in []Instance) ([]placement.Instance, error) {
	if len(in) == 0 {
		return nil, badRequest("no instances given")
	}
	out := make([]placement.Instance, len(in))
	for i, x := range in {
		if x.ID == "" || x.IsolationGroup == "" || x.Endpoint == "" {
			return nil, badRequest("instances[%d]: id, isolationGroup and endpoint are required", i)
		}
		out[i] = x.toPlacement()
	}
	return out, nil
}

type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

func (h *Handler) wrap(fn func(ctx context.Context, r *http.Request) (placement.Placement, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t := h.Timeout
		if t <= 0 {
			t = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(r.Context(), t)
		defer cancel()
		p, err := fn(ctx, r)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(status(err))
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(p)
	}
}

func status(err error) int {
	var re *requestError
	switch {
	case errors.As(err, &re):
		return http.StatusBadRequest
	case errors.Is(err, placement.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, placement.ErrCASConflict), errors.Is(err, placement.ErrShardsMoving), errors.Is(err, placement.ErrExists):
		return http.StatusConflict
	case placement.IsUnreachable(err), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("bad JSON body: %v", err)
	}
	return nil
}

func (h *Handler) get(ctx context.Context, _ *http.Request) (placement.Placement, error) {
	return h.Store.Get(ctx)
}

func (h *Handler) init(ctx context.Context, r *http.Request) (placement.Placement, error) {
	var req struct {
		Instances     []Instance `json:"instances"`
		NumShards     uint32     `json:"numShards"`
		ReplicaFactor int        `json:"replicaFactor"`
	}
	if err := decode(r, &req); err != nil {
		return placement.Placement{}, err
	}
	ins, err := instances(req.Instances)
	if err != nil {
		return placement.Placement{}, err
	}
	if req.NumShards == 0 {
		req.NumShards = ident.DefaultNumShards
	}
	if req.ReplicaFactor <= 0 {
		return placement.Placement{}, badRequest("replicaFactor must be >= 1")
	}
	return h.Store.Init(ctx, ins, req.NumShards, req.ReplicaFactor)
}

func (h *Handler) add(ctx context.Context, r *http.Request) (placement.Placement, error) {
	var req struct {
		Instances []Instance `json:"instances"`
		Force     bool       `json:"force"`
	}
	if err := decode(r, &req); err != nil {
		return placement.Placement{}, err
	}
	ins, err := instances(req.Instances)
	if err != nil {
		return placement.Placement{}, err
	}
	return h.Store.Add(ctx, ins, placement.ChangeOptions{Force: req.Force})
}

func (h *Handler) remove(ctx context.Context, r *http.Request) (placement.Placement, error) {
	force := r.URL.Query().Get("force") == "true"
	return h.Store.Remove(ctx, []string{r.PathValue("id")}, placement.ChangeOptions{Force: force})
}

func (h *Handler) replace(ctx context.Context, r *http.Request) (placement.Placement, error) {
	var req struct {
		Leaving   []string   `json:"leaving"`
		Instances []Instance `json:"instances"`
		Force     bool       `json:"force"`
	}
	if err := decode(r, &req); err != nil {
		return placement.Placement{}, err
	}
	if len(req.Leaving) == 0 {
		return placement.Placement{}, badRequest("leaving: name the instances to replace")
	}
	ins, err := instances(req.Instances)
	if err != nil {
		return placement.Placement{}, err
	}
	return h.Store.Replace(ctx, req.Leaving, ins, placement.ChangeOptions{Force: req.Force})
}

func (h *Handler) markAvailable(ctx context.Context, r *http.Request) (placement.Placement, error) {
	var req struct {
		Instance string   `json:"instance"`
		Shards   []uint32 `json:"shards"`
	}
	if err := decode(r, &req); err != nil {
		return placement.Placement{}, err
	}
	if req.Instance == "" {
		return placement.Placement{}, badRequest("instance is required")
	}
	return h.Store.MarkAvailable(ctx, req.Instance, req.Shards...)
}
