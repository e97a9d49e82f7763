package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/auxsnap"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// The node's exemplars and metadata survive a restart through snapshot
// files under <dataDir>/aux (dbnode/auxsnap): written every
// ingest.snapshotInterval and once more at a graceful stop, read at start.

func (n *Node) auxPath(name string) string { return filepath.Join(n.cfg.DataDir, "aux", name) }

// loadAux restores the exemplar and metadata stores from their snapshots
// and returns the damage found, for /ready. A damaged snapshot keeps the
// records before the damage, is logged and counted, and is kept as
// <file>.corrupt; the node starts all the same.
func (n *Node) loadAux() []string {
	var damage []string
	scope := n.scope.SubScope("aux_snapshot")
	load := func(name string, restore func([]byte) (int, error)) {
		path := n.auxPath(name)
		b, err := auxsnap.Load(vfs.OS(), path)
		if err != nil {
			scope.Tagged(map[string]string{"op": "load"}).Counter("errors").Inc(1)
			n.log.Warn("exemplar/metadata snapshot not read", "path", path, "err", err)
			damage = append(damage, fmt.Sprintf("%s: %v", path, err))
			return
		}
		kept, err := restore(b)
		var de *auxsnap.DamageError
		if errors.As(err, &de) {
			scope.Counter("damaged").Inc(1)
			n.log.Warn("exemplar/metadata snapshot damaged", "path", path, "kept", kept, "err", err)
			damage = append(damage, fmt.Sprintf("%s: %v", path, err))
			if rerr := os.Rename(path, path+".corrupt"); rerr != nil {
				n.log.Warn("keep damaged snapshot aside", "path", path, "err", rerr)
			}
			return
		}
		if kept > 0 {
			n.log.Info("exemplars/metadata restored", "path", path, "records", kept)
		}
	}
	load("exemplars.snap", func(b []byte) (int, error) {
		items, err := auxsnap.DecodeExemplars(b)
		n.api.Exemplars().Add(items)
		return len(items), err
	})
	load("metadata.snap", func(b []byte) (int, error) {
		rs, err := auxsnap.DecodeMetadata(b)
		n.api.Metadata().AddRecords(rs)
		return len(rs), err
	})
	return damage
}

// saveAux writes both snapshots.
func (n *Node) saveAux() error {
	start := time.Now()
	err := errors.Join(
		auxsnap.Save(vfs.OS(), n.auxPath("exemplars.snap"), auxsnap.EncodeExemplars(n.api.Exemplars().Snapshot())),
		auxsnap.Save(vfs.OS(), n.auxPath("metadata.snap"), auxsnap.EncodeMetadata(n.api.Metadata().Snapshot())))
	if err != nil {
		n.scope.SubScope("aux_snapshot").Tagged(map[string]string{"op": "save"}).Counter("errors").Inc(1)
		return err
	}
	n.log.Debug("exemplars/metadata snapshot written", "took", time.Since(start))
	return nil
}

// snapshotAux saves the snapshots every interval until ctx ends; a
// failed save is logged and counted, and the next one tries again.
func (n *Node) snapshotAux(ctx context.Context, every time.Duration) {
	if every <= 0 { // a config that skipped Defaults: only the stop saves
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := n.saveAux(); err != nil {
				n.log.Warn("exemplar/metadata snapshot", "err", err)
			}
		}
	}
}
