package node

import (
	"fmt"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/tessera-tsdb/tessera/dbnode/console"
	"github.com/tessera-tsdb/tessera/placement"
)

// registerConsole mounts the operator's console (dbnode/console) on the
// node's mux: the placement from the store (the cached one when etcd does
// not answer; call it once n.topo is set), the other instances probed over HTTP(S), rates from this
// node's registry (read by the returned console's Run).
func (n *Node) registerConsole(store *placement.Store, reg prom.Gatherer) *console.Console {
	topo := n.topo
	scheme := "http"
	var probe *http.Client
	if n.sec.httpsOn {
		scheme = "https"
		// Other nodes' HTTPS certificates are checked against the system
		// roots, and against the cluster CA when node RPC has one (a
		// secured cluster usually signs both with it).
		if n.sec.httpsProbe != nil {
			probe = &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: n.sec.httpsProbe.Clone()}}
		}
	}
	var insecure []console.InsecureSurface
	for _, s := range n.insecure {
		insecure = append(insecure, console.InsecureSurface{Surface: s.Name, Listen: s.Addr})
	}
	c := console.New(console.Options{
		Insecure:  insecure,
		Self:      n.cfg.ID,
		Placement: store.Get,
		Cached: func() *placement.Placement {
			if m := topo.Get(); m != nil {
				p := m.Placement
				return &p
			}
			return nil
		},
		Local:       n.api.Mux(),
		Counters:    func() (map[string]float64, error) { return sumCounters(reg) },
		Scheme:      scheme,
		ProbeClient: probe,
	})
	c.Register(n.api.Mux())
	return c
}

// sumCounters adds up every counter of the registry by metric name (all
// label sets together).
func sumCounters(reg prom.Gatherer) (map[string]float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				out[mf.GetName()] += c.GetValue()
			}
		}
	}
	return out, nil
}
