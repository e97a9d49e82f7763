package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/repair"
)

// startRepair starts the anti-entropy repair loop (when repair.enabled)
// on bg and serves its status at GET /api/v1/status/repair either way.
// The bootstrap's post-join catch-up (cu) runs on bg whether or not the
// periodic passes are on: it is part of a shard's move, not background
// anti-entropy.
func (n *Node) startRepair(ctx context.Context, db *storage.Database, dials *dialCache, cu *catchUp, bg *sync.WaitGroup) error {
	c := n.cfg.Repair
	r, err := repair.New(repair.Options{
		InstanceID: n.cfg.ID, DB: db, Dial: dials.repairPeer, Placement: n.topo.Get,
		Every: c.Every, CompareOnly: c.CompareOnly, MaxBytesPerSecond: c.MaxBytesPerSecond,
		SettleMargin: c.SettleMargin, SeriesPerFetch: c.SeriesPerFetch,
		StateDir: filepath.Join(n.cfg.DataDir, "repair"), FS: vfs.OS(),
		Logger: n.log.With("component", "repair"), Metrics: n.scope.SubScope("repair"),
	})
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	bg.Go(func() { cu.run(ctx, r) })
	if !c.RepairEnabled() {
		n.api.Mux().Handle("GET "+repair.StatusPath, repair.StatusHandler(func() repair.Status {
			return repair.Status{Enabled: false, CompareOnly: c.CompareOnly, Every: c.Every}
		}))
		return nil
	}
	n.api.Mux().Handle("GET "+repair.StatusPath, repair.StatusHandler(r.Status))
	bg.Go(func() { r.Run(ctx) })
	return nil
}
