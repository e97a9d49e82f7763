package node

import (
	"fmt"
	"path/filepath"

	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/client/hints"
)

// openHints opens the hint store under <dataDir>/hints (config hints
// section) and serves its state at GET /api/v1/status/hints. Off: the
// zero options and a nil closer.
func (n *Node) openHints() (client.HintOptions, func() error, error) {
	h := n.cfg.Hints
	if !*h.Enabled {
		n.api.Mux().Handle("GET /api/v1/status/hints", hints.StatusHandler(nil))
		return client.HintOptions{}, nil, nil
	}
	st, err := hints.Open(filepath.Join(n.cfg.DataDir, "hints"), hints.Options{
		MaxBytes: h.MaxBytesPerTarget, MaxAge: h.MaxAge,
		Logger: n.log, Metrics: n.scope.SubScope("hints"),
	})
	if err != nil {
		return client.HintOptions{}, nil, fmt.Errorf("hints: %w", err)
	}
	n.api.Mux().Handle("GET /api/v1/status/hints", hints.StatusHandler(st))
	return client.HintOptions{Store: st, ReplayBytesPerSecond: h.ReplayBytesPerSecond}, st.Close, nil
}
