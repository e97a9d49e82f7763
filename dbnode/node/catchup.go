package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
	"github.com/tessera-tsdb/tessera/repair"
)

// catchUp runs repair.CatchUp over the shards each bootstrap round marked
// AVAILABLE, bootstrap.catchUpAfter after the round's CAS: the writes a
// streaming source missed but the shard's other owners acknowledged
// (bootstrap-repair.md, "After the CAS"). Rounds are caught up in the
// order they finished, one at a time.
type catchUp struct {
	after time.Duration
	log   *slog.Logger

	mu   sync.Mutex
	due  []dueShards
	wake chan struct{}
}

type dueShards struct {
	at     time.Time
	shards []uint32
}

func newCatchUp(after time.Duration, log *slog.Logger) *catchUp {
	return &catchUp{after: after, log: log, wake: make(chan struct{}, 1)}
}

// marked is bootstrap's Marked hook: it only queues, never blocks a round.
func (c *catchUp) marked(shards []uint32) {
	c.mu.Lock()
	c.due = append(c.due, dueShards{at: time.Now().Add(c.after), shards: append([]uint32(nil), shards...)})
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run catches up each queued round once it is due, until ctx ends.
func (c *catchUp) run(ctx context.Context, r *repair.Repairer) {
	for {
		c.mu.Lock()
		queued := len(c.due) > 0
		var next dueShards
		if queued {
			next, c.due = c.due[0], c.due[1:]
		}
		c.mu.Unlock()
		if !queued {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
				continue
			}
		}
		if ctxsleep.Sleep(ctx, time.Until(next.at)) != nil {
			return
		}
		began := time.Now()
		t := r.CatchUp(ctx, next.shards)
		c.log.Info("bootstrap catch-up done", "shards", len(next.shards), "samples_pulled", t.SamplesRepaired,
			"series_pulled", t.SeriesRepaired, "errors", t.Errors, "took", time.Since(began))
	}
}
