// Package hints is the coordinator's hinted handoff storage: per target
// instance, a bounded, durable, ordered queue of the samples that replica
// did not acknowledge, kept under <dataDir>/hints/<instance>/ until the
// client session replays them (client/hints.go). docs/format/hints.md
// describes the files.
package hints

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/uber-go/tally/v4"
)

// Options bound and place the queues. The defaults live in config
// (the hints section); Open refuses a missing bound by name.
type Options struct {
	// MaxBytes bounds one target's queue; past it the oldest segment is
	// dropped. Required (> 0).
	MaxBytes int64
	// MaxAge: older hints are dropped instead of replayed. Required (> 0).
	MaxAge time.Duration
	// SegmentBytes is the size at which a segment file is closed and a new
	// one started; 0 means MaxBytes/8, at least 64 KiB and at most 64 MiB.
	SegmentBytes int64
	FS           vfs.FS           // nil: the real file system
	Now          func() time.Time // nil: time.Now
	Logger       *slog.Logger     // nil discards
	Metrics      tally.Scope      // nil discards
}

// Store holds the hint queues of every target, one directory each.
type Store struct {
	dir  string
	opts Options

	mu     sync.Mutex
	queues map[string]*Queue
	closed bool
}

// targetMetrics are one queue's tally metrics, and the same counts kept
// for the status endpoint.
type targetMetrics struct {
	bytes, records, oldest tally.Gauge
	appended, replayed     tally.Counter
	replayedSamples        tally.Counter
	scope                  tally.Scope

	totAppended, totReplayed, totReplayedSamples atomic.Int64

	mu      sync.Mutex
	dropped map[string]int64
}

// drop counts n dropped records (or samples: reasons ending in _samples).
func (m *targetMetrics) drop(reason string, n int64) {
	m.scope.Tagged(map[string]string{"reason": reason}).Counter("dropped").Inc(n)
	m.mu.Lock()
	if m.dropped == nil {
		m.dropped = map[string]int64{}
	}
	m.dropped[reason] += n
	m.mu.Unlock()
}

func (m *targetMetrics) droppedTotals() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.dropped))
	for k, v := range m.dropped {
		out[k] = v
	}
	return out
}

// Open opens (creating it if needed) the hint store in dir and every
// target queue found there, so hints written before a restart or a crash
// are replayed.
func Open(dir string, opts Options) (*Store, error) {
	switch {
	case opts.MaxBytes <= 0:
		return nil, fmt.Errorf("hints: Options.MaxBytes must be > 0, got %d", opts.MaxBytes)
	case opts.MaxAge <= 0:
		return nil, fmt.Errorf("hints: Options.MaxAge must be > 0, got %v", opts.MaxAge)
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = min(max(opts.MaxBytes/8, 64<<10), 64<<20)
	}
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	s := &Store{dir: dir, opts: opts, queues: map[string]*Queue{}}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hints: %w", err)
	}
	ents, err := opts.FS.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("hints: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		target, err := url.PathUnescape(e.Name())
		if err != nil {
			opts.Logger.Warn("hints: directory not named after an instance: ignored", "dir", filepath.Join(dir, e.Name()))
			continue
		}
		if _, err := s.Queue(target); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Queue returns the queue of target, creating it on first use.
func (s *Store) Queue(target string) (*Queue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if q := s.queues[target]; q != nil {
		return q, nil
	}
	if target == "" || target == "." || target == ".." {
		return nil, fmt.Errorf("hints: %q cannot name a target instance's directory", target)
	}
	sc := s.opts.Metrics.Tagged(map[string]string{"target": target})
	m := &targetMetrics{scope: sc, bytes: sc.Gauge("bytes"), records: sc.Gauge("records"),
		oldest: sc.Gauge("oldest_age_seconds"), appended: sc.Counter("appended"),
		replayed: sc.Counter("replayed"), replayedSamples: sc.Counter("replayed_samples")}
	q, err := openQueue(target, filepath.Join(s.dir, url.PathEscape(target)), s.opts, m)
	if err != nil {
		return nil, err
	}
	s.queues[target] = q
	return q, nil
}

// Targets returns the instances that have a queue, sorted.
func (s *Store) Targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.queues))
	for t := range s.queues {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Status returns every queue's state, sorted by target.
func (s *Store) Status() []Status {
	s.mu.Lock()
	qs := make([]*Queue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.mu.Unlock()
	out := make([]Status, 0, len(qs))
	for _, q := range qs {
		out = append(out, q.Status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// Replayed counts a record delivered to its target.
func (q *Queue) Replayed(rec Record) {
	q.m.replayed.Inc(int64(rec.frames))
	q.m.replayedSamples.Inc(int64(len(rec.Samples) + len(rec.Histograms)))
	q.m.totReplayed.Add(int64(rec.frames))
	q.m.totReplayedSamples.Add(int64(len(rec.Samples) + len(rec.Histograms)))
}

// Dropped counts samples of a record dropped at replay (the target no
// longer owns their shard, or refused them for good).
func (q *Queue) Dropped(reason string, samples int) {
	q.m.drop(reason+"_samples", int64(samples))
	q.opts.Logger.Warn("hinted samples dropped", "target", q.target, "reason", reason, "samples", samples)
}

// Close closes every queue's files.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, q := range s.queues {
		errs = append(errs, q.close())
	}
	return errors.Join(errs...)
}
