package client

import (
	"fmt"
	"strings"

	"github.com/tessera-tsdb/tessera/placement"
)

// WriteLevel is how many replicas of a shard must acknowledge a write.
type WriteLevel int

const (
	WriteOne WriteLevel = iota + 1
	WriteMajority
	WriteAll
)

// ReadLevel is how many replicas of a shard must answer a read.
type ReadLevel int

const (
	ReadOne ReadLevel = iota + 1
	// ReadUnstrictMajority wants a majority but settles for any one
	// successful replica once the others have failed.
	ReadUnstrictMajority
	ReadMajority
	ReadAll
)

// ParseWriteLevel parses one, majority, all.
func ParseWriteLevel(s string) (WriteLevel, error) {
	switch strings.ToLower(s) {
	case "one":
		return WriteOne, nil
	case "majority":
		return WriteMajority, nil
	case "all":
		return WriteAll, nil
	}
	return 0, fmt.Errorf("unknown write consistency level %q (want one, majority or all)", s)
}

// ParseReadLevel parses one, unstrict_majority, majority, all.
func ParseReadLevel(s string) (ReadLevel, error) {
	switch strings.ToLower(strings.ReplaceAll(s, "-", "_")) {
	case "one":
		return ReadOne, nil
	case "unstrict_majority":
		return ReadUnstrictMajority, nil
	case "majority":
		return ReadMajority, nil
	case "all":
		return ReadAll, nil
	}
	return 0, fmt.Errorf("unknown read consistency level %q (want one, unstrict_majority, majority or all)", s)
}

func (l WriteLevel) String() string {
	return [...]string{"invalid", "one", "majority", "all"}[l]
}

func (l ReadLevel) String() string {
	return [...]string{"invalid", "one", "unstrict_majority", "majority", "all"}[l]
}

func majority(rf int) int { return rf/2 + 1 }

// required is the number of counted replicas a level needs.
func (l WriteLevel) required(rf int) int {
	switch l {
	case WriteOne:
		return 1
	case WriteAll:
		return rf
	}
	return majority(rf)
}

func (l ReadLevel) required(rf int) int {
	switch l {
	case ReadOne:
		return 1
	case ReadAll:
		return rf
	}
	return majority(rf)
}

// Quorum is the one place consistency levels are decided. It counts, per
// shard, which replicas acknowledged; it is pure and not goroutine-safe.
//
// Counting rules (DESIGN.md, Write and read paths):
//   - writes: an AVAILABLE owner that acknowledged counts one. INITIALIZING
//     and LEAVING owners receive the write but count nothing, except that
//     with pairing an INITIALIZING owner and the LEAVING owner it streams
//     from count one together when BOTH acknowledged: the data is then on
//     the copy that serves now and on the copy that will serve next, so
//     writes keep succeeding while shards move (m3db/m3#417).
//   - reads: AVAILABLE and LEAVING owners count one each (a LEAVING owner
//     still has everything); INITIALIZING owners are not asked.
type Quorum struct {
	owners   []placement.Owner
	need     int
	pairing  bool
	read     bool
	unstrict bool
	acked    []bool
	failed   []bool
}

// NewWriteQuorum tracks a write to a shard with the given owners.
func NewWriteQuorum(owners []placement.Owner, rf int, level WriteLevel, pairing bool) *Quorum {
	return &Quorum{owners: owners, need: level.required(rf), pairing: pairing,
		acked: make([]bool, len(owners)), failed: make([]bool, len(owners))}
}

// NewReadQuorum tracks a read of a shard with the given owners.
func NewReadQuorum(owners []placement.Owner, rf int, level ReadLevel) *Quorum {
	return &Quorum{owners: owners, need: level.required(rf), read: true, unstrict: level == ReadUnstrictMajority,
		acked: make([]bool, len(owners)), failed: make([]bool, len(owners))}
}

// Record notes the outcome of one owner, by instance ID.
func (q *Quorum) Record(instanceID string, ok bool) {
	for i, o := range q.owners {
		if o.InstanceID == instanceID {
			if ok {
				q.acked[i] = true
			} else {
				q.failed[i] = true
			}
		}
	}
}

// Counted is the number of replicas the acknowledgements so far count for.
func (q *Quorum) Counted() int { return q.count(q.acked) }

// Satisfied reports whether the level is met.
func (q *Quorum) Satisfied() bool {
	n := q.Counted()
	if n >= q.need {
		return true
	}
	// Unstrict majority: one answer is enough once no more can come.
	return q.unstrict && n >= 1 && q.Settled()
}

// Possible reports whether the level can still be met by owners that have
// not failed.
func (q *Quorum) Possible() bool {
	if q.Satisfied() {
		return true
	}
	maybe := make([]bool, len(q.owners))
	for i := range q.owners {
		maybe[i] = !q.failed[i]
	}
	n := q.count(maybe)
	if q.unstrict {
		return n >= 1
	}
	return n >= q.need
}

// Settled reports whether every owner that counts has answered.
func (q *Quorum) Settled() bool {
	for i, o := range q.owners {
		if q.participates(o) && !q.acked[i] && !q.failed[i] {
			return false
		}
	}
	return true
}

// Participates says whether an owner is asked at all: writes go to every
// owner, reads to AVAILABLE and LEAVING ones.
func (q *Quorum) participates(o placement.Owner) bool {
	return !q.read || o.State == placement.Available || o.State == placement.Leaving
}

func (q *Quorum) count(ok []bool) int {
	n := 0
	for i, o := range q.owners {
		if !ok[i] {
			continue
		}
		switch o.State {
		case placement.Available:
			n++
		case placement.Leaving:
			if q.read {
				n++
			}
		case placement.Initializing:
			if !q.read && q.pairing && o.SourceID != "" {
				// Count the pair once, from the INITIALIZING side.
				for j, src := range q.owners {
					if src.InstanceID == o.SourceID && src.State == placement.Leaving && ok[j] {
						n++
						break
					}
				}
			}
		}
	}
	return n
}

// Failed lists the owners that failed, for error messages.
func (q *Quorum) Failed() []string {
	var out []string
	for i, o := range q.owners {
		if q.failed[i] {
			out = append(out, o.InstanceID)
		}
	}
	return out
}

// Need is the number of counted replicas the level requires.
func (q *Quorum) Need() int { return q.need }
