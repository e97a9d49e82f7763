package bootstrap

import (
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
)

// Progress is a snapshot of the bootstrap for /ready, the console, logs
// and metrics. It is read while a round runs: the counters behind it move
// per fetched block and per page of unflushed data, not per round, so an
// operator watching a multi-hour bootstrap sees it advance.
type Progress struct {
	// ShardsTotal is this node's shards in the placement of the current
	// (or last) round; ShardsDone those AVAILABLE or LEAVING, plus those
	// the round has marked available so far.
	ShardsTotal int `json:"shardsTotal"`
	ShardsDone  int `json:"shardsDone"`
	// Running is true while a round streams or marks shards available.
	Running bool `json:"running"`
	// RoundShards is how many INITIALIZING shards the round streams;
	// RoundStreamed how many of them are streamed and durable (waiting
	// for the round's mark-available CAS).
	RoundShards   int `json:"roundShards"`
	RoundStreamed int `json:"roundStreamed"`
	// Samples and Bytes streamed by the current (or last) round so far.
	Samples int64 `json:"samples"`
	Bytes   int64 `json:"bytes"`
	// Elapsed since the round started (it stops with the round).
	Elapsed time.Duration `json:"elapsedNs"`
	// SamplesPerSecond and BytesPerSecond average over the round.
	SamplesPerSecond float64 `json:"samplesPerSecond"`
	BytesPerSecond   float64 `json:"bytesPerSecond"`
	// ETA is the estimated time left in the round, from the share of its
	// shards streamed so far at the round's pace; -1 while no shard of
	// the round is streamed yet (nothing to extrapolate from) and 0 when
	// no round runs.
	ETA time.Duration `json:"etaNs"`
}

// roundProgress holds what Progress reads, updated by the workers as
// they go. Every field is atomic: /ready reads it on each request without
// taking the round's locks.
type roundProgress struct {
	total, done            atomic.Int64
	running                atomic.Bool
	roundShards, streamed  atomic.Int64
	samples, bytes         atomic.Int64 // since the node started
	baseSamples, baseBytes atomic.Int64 // samples and bytes at the round's start
	startNs, endNs         atomic.Int64 // unix ns; endNs 0 while running
}

// start begins a round of n shards to stream.
func (p *roundProgress) start(now time.Time, n int) {
	p.baseSamples.Store(p.samples.Load())
	p.baseBytes.Store(p.bytes.Load())
	p.roundShards.Store(int64(n))
	p.streamed.Store(0)
	p.endNs.Store(0)
	p.startNs.Store(now.UnixNano())
	p.running.Store(true)
}

// finish ends the round: the rates and elapsed time stop there.
func (p *roundProgress) finish(now time.Time) {
	p.endNs.Store(now.UnixNano())
	p.running.Store(false)
}

func (p *roundProgress) snapshot(now time.Time) Progress {
	out := Progress{
		ShardsTotal: int(p.total.Load()), ShardsDone: int(p.done.Load()),
		Running:     p.running.Load(),
		RoundShards: int(p.roundShards.Load()), RoundStreamed: int(p.streamed.Load()),
		Samples: p.samples.Load() - p.baseSamples.Load(),
		Bytes:   p.bytes.Load() - p.baseBytes.Load(),
	}
	start := p.startNs.Load()
	if start == 0 {
		return out
	}
	end := now.UnixNano()
	if e := p.endNs.Load(); e != 0 {
		end = e
	}
	out.Elapsed = time.Duration(max(end-start, 0))
	if sec := out.Elapsed.Seconds(); sec > 0 {
		out.SamplesPerSecond = float64(out.Samples) / sec
		out.BytesPerSecond = float64(out.Bytes) / sec
	}
	if out.Running {
		out.ETA = eta(out.Elapsed, out.RoundStreamed, out.RoundShards)
	}
	return out
}

// eta extrapolates the time left from the share of shards streamed in
// elapsed; -1 when nothing is streamed yet.
func eta(elapsed time.Duration, streamed, total int) time.Duration {
	if streamed <= 0 {
		return -1
	}
	if streamed >= total {
		return 0
	}
	return time.Duration(float64(elapsed) * float64(total-streamed) / float64(streamed))
}

// progressGauges export Progress as metrics, updated whenever it moves.
type progressGauges struct {
	roundShards, streamed, done, total tally.Gauge
	eta, bytesRate, samplesRate        tally.Gauge
}

func newProgressGauges(s tally.Scope) progressGauges {
	return progressGauges{
		roundShards: s.Gauge("round_shards"),
		streamed:    s.Gauge("round_shards_streamed"),
		done:        s.Gauge("shards_done"),
		total:       s.Gauge("shards_total"),
		eta:         s.Gauge("round_eta_seconds"),
		bytesRate:   s.Gauge("round_bytes_per_second"),
		samplesRate: s.Gauge("round_samples_per_second"),
	}
}

func (g progressGauges) update(p Progress) {
	g.roundShards.Update(float64(p.RoundShards))
	g.streamed.Update(float64(p.RoundStreamed))
	g.done.Update(float64(p.ShardsDone))
	g.total.Update(float64(p.ShardsTotal))
	g.eta.Update(p.ETA.Seconds())
	g.bytesRate.Update(p.BytesPerSecond)
	g.samplesRate.Update(p.SamplesPerSecond)
}
