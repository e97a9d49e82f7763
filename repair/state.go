package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// stateVersion is the version of the state file's format
// (docs/format/repair-state.md).
const stateVersion = 1

// ShardResult is what the last comparison of one shard found and did.
type ShardResult struct {
	Namespace string `json:"namespace"`
	Shard     uint32 `json:"shard"`
	// Pass is the number of the pass that compared it.
	Pass  uint64        `json:"pass"`
	At    time.Time     `json:"at"`
	Took  time.Duration `json:"tookNs"`
	Peers int           `json:"peers"`
	Tally
	// Error is the first failure (a peer unreachable, a storage error);
	// the rest of the shard's peers were still compared.
	Error string `json:"error,omitempty"`
}

// Tally counts the work of a shard, a pass or the node's lifetime.
type Tally struct {
	BlocksCompared  int64 `json:"blocksCompared"`
	BlocksDiffering int64 `json:"blocksDiffering"`
	SeriesCompared  int64 `json:"seriesCompared"`
	SeriesDiffering int64 `json:"seriesDiffering"`
	SeriesRepaired  int64 `json:"seriesRepaired"`
	SamplesRepaired int64 `json:"samplesRepaired"`
	// SamplesSkipped were pulled but refused by storage (out of retention
	// by the time they arrived).
	SamplesSkipped int64 `json:"samplesSkipped"`
	// Bytes received from peers: digests, checksums and pulled streams.
	Bytes  int64 `json:"bytes"`
	Errors int64 `json:"errors"`
}

func (t *Tally) add(o Tally) {
	t.BlocksCompared += o.BlocksCompared
	t.BlocksDiffering += o.BlocksDiffering
	t.SeriesCompared += o.SeriesCompared
	t.SeriesDiffering += o.SeriesDiffering
	t.SeriesRepaired += o.SeriesRepaired
	t.SamplesRepaired += o.SamplesRepaired
	t.SamplesSkipped += o.SamplesSkipped
	t.Bytes += o.Bytes
	t.Errors += o.Errors
}

// Pass is one walk over every shard the node owns.
type Pass struct {
	Number      uint64    `json:"number"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished,omitzero"`
	ShardsTotal int       `json:"shardsTotal"`
	ShardsDone  int       `json:"shardsDone"`
	Tally
}

// state is what survives a restart: the current (or last) pass and each
// shard's last result.
type state struct {
	Version int                    `json:"version"`
	Pass    Pass                   `json:"pass"`
	Shards  map[string]ShardResult `json:"shards"`
}

func shardKey(ns string, shard uint32) string { return fmt.Sprintf("%s/%d", ns, shard) }

// decodeState parses a state file, refusing what it cannot trust.
func decodeState(b []byte) (state, error) {
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return state{}, fmt.Errorf("parse repair state: %w", err)
	}
	if s.Version != stateVersion {
		return state{}, fmt.Errorf("repair state: version %d, want %d", s.Version, stateVersion)
	}
	for k, r := range s.Shards {
		if k != shardKey(r.Namespace, r.Shard) {
			return state{}, fmt.Errorf("repair state: entry %q holds shard %s", k, shardKey(r.Namespace, r.Shard))
		}
		if r.Pass > s.Pass.Number {
			return state{}, fmt.Errorf("repair state: shard %s from pass %d, after the current pass %d", k, r.Pass, s.Pass.Number)
		}
	}
	if s.Shards == nil {
		s.Shards = map[string]ShardResult{}
	}
	return s, nil
}

// loadState reads the state file; a missing one is a fresh state, a bad
// one is reported and replaced by a fresh state (it only records
// progress: losing it costs a full pass, never data).
func loadState(fsys vfs.FS, path string) (state, error) {
	fresh := state{Version: stateVersion, Shards: map[string]ShardResult{}}
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return fresh, fmt.Errorf("read repair state %s: %w", path, err)
	}
	s, err := decodeState(b)
	if err != nil {
		return fresh, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (s *state) encode() ([]byte, error) { return json.Marshal(s) }

// Status is what GET /api/v1/status/repair and `tessera repair status`
// show.
type Status struct {
	Enabled     bool          `json:"enabled"`
	CompareOnly bool          `json:"compareOnly"`
	Every       time.Duration `json:"everyNs"`
	// Running says a pass is under way now.
	Running bool `json:"running"`
	Pass    Pass `json:"pass"`
	// Total is the tally since this process started.
	Total  Tally         `json:"total"`
	Shards []ShardResult `json:"shards"`
}

func (s *state) status() []ShardResult {
	out := make([]ShardResult, 0, len(s.Shards))
	for _, r := range s.Shards {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Shard < out[j].Shard
	})
	return out
}
