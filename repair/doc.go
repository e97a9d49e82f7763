// Package repair is background anti-entropy repair: replicas of a shard
// that missed writes (a replica down or frozen past what hints cover, a
// fileset lost) converge again, index included.
//
// A pass walks every shard this node holds AVAILABLE, per namespace, and
// compares it with each other AVAILABLE owner of the shard:
//
//  1. digests: one BlockDigests call per (shard, peer) returns a digest per
//     block (flushed or still in memory) over the samples a read returns
//     in [start, cutoff). The node computes its own the same way; blocks
//     whose digests agree cost nothing more.
//  2. narrow: for a block that differs (or that one side lacks), the
//     per-series checksums (SeriesChecksums, paged) of both sides name the
//     series the peer holds that this node lacks or holds differently.
//  3. pull and merge: those series are fetched (Fetch, over the block's
//     compared range) and merged with storage.RepairSeries: a sample is
//     written when this node has none at its timestamp or the peer's value
//     wins the merge rule (storage.Wins: the larger float64 bit pattern;
//     native histograms, fetched with accept_histograms, in the same
//     merge by storage.HistogramWins: the larger
//     encoding as a one-sample histogram stream behind a kind byte),
//     through the commit log and memory like a bootstrap load, so the
//     series is indexed for the block and the next flush writes it to a
//     fileset. A pull only ever adds to this node; the peer gets what only
//     this node has when it runs its own pass.
//
// The cutoff is now - bufferPast - settleMargin: samples newer than that
// may still be on their way to some replica, so comparing them would
// report differences a moment later gone. start is the oldest block still
// fully inside retention.
//
// Compare-only mode stops after step 2 and reports. Bytes received are
// paced (maxBytesPerSecond). Each shard's last result and the pass's
// progress are written to <dataDir>/repair/state.json (docs/format/
// repair-state.md) so a restarted node resumes its pass where it stopped
// and still reports what it last found.
package repair
