package client

import (
	"context"
	"errors"

	"github.com/tessera-tsdb/tessera/client/hints"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
)

// Hinted handoff of native histograms: the share of a histogram write a
// remote replica did not acknowledge goes into its hint queue as a
// histogram record (docs/format/hints.md) and is replayed fill-only, as
// floats are.

// hintHistograms is hint for native histogram samples.
func (h *hinter) hintHistograms(inst, ns string, batch []storage.HistogramSample, err error) {
	var refused *HistogramRefusedError
	if h == nil || inst == h.s.opts.LocalID || !hintable(err) || errors.As(err, &refused) {
		return
	}
	q, qerr := h.opts.Store.Queue(inst)
	if qerr == nil {
		qerr = q.AppendHistograms(ns, batch)
	}
	if qerr != nil {
		h.s.m.hintFail.Inc(1)
		h.s.opts.Logger.Warn("histogram hint not stored: the replica stays short of these samples until repair",
			"instance", inst, "samples", len(batch), "write_err", err, "err", qerr)
		return
	}
	h.s.m.hinted.Inc(int64(len(batch)))
	h.start(inst)
}

// histogramFillWriter is a histogramPeer that writes fill-only
// (*rpc.Client); peers without it overwrite.
type histogramFillWriter interface {
	WriteHistogramsFill(ctx context.Context, ns string, samples []storage.HistogramSample) (WriteResult, error)
}

// deliverHistograms is deliver for a histogram record. A target that
// refuses the format (InvalidArgument: a node older than histograms)
// would refuse every replay: the record is dropped, counted rejected,
// rather than blocking the queue behind it.
func (h *hinter) deliverHistograms(ctx context.Context, q *hints.Queue, host *host, m *Map, rec hints.Record) error {
	kept := rec.Histograms[:0:0]
	for i := range rec.Histograms {
		if ownsShard(m, host.instance, rec.Histograms[i].Shard) {
			kept = append(kept, rec.Histograms[i])
		}
	}
	if n := len(rec.Histograms) - len(kept); n > 0 {
		q.Dropped(hints.DropNotOwner, n)
	}
	hp, ok := host.peer.(histogramPeer)
	if !ok {
		q.Dropped(hints.DropRejected, len(kept))
		return nil
	}
	for len(kept) > 0 {
		gctx, cancel, err := host.health.guard(ctx)
		if err != nil {
			return err
		}
		tctx, tcancel := context.WithTimeout(gctx, h.s.opts.RequestTimeout)
		var resp WriteResult
		if fw, ok := host.peer.(histogramFillWriter); ok {
			resp, err = fw.WriteHistogramsFill(tctx, rec.Namespace, kept)
		} else {
			resp, err = hp.WriteHistograms(tctx, rec.Namespace, kept)
		}
		err = callErr(gctx, err)
		tcancel()
		cancel()
		var rerr *rpc.Error
		switch {
		case rpc.Code(err) == codes.FailedPrecondition && errors.As(err, &rerr) && len(rerr.Shards) > 0:
			rest := withoutShards(kept, rerr.Shards)
			q.Dropped(hints.DropNotOwner, len(kept)-len(rest))
			kept = rest
			continue
		case rpc.Code(err) == codes.InvalidArgument:
			h.s.opts.Logger.Warn("histogram hints refused by the target: dropped", "target", host.instance, "samples", len(kept), "err", err)
			q.Dropped(hints.DropRejected, len(kept))
			return nil
		case err != nil:
			return err
		}
		if resp.Rejected > 0 {
			q.Dropped(hints.DropRejected, resp.Rejected)
		}
		return nil
	}
	return nil
}
