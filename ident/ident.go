// Package ident defines a series' identity: the canonical byte encoding of
// its labels and the virtual shard that identity hashes to.
//
// The ID doubles as the series' tag set: it is a lossless encoding of the
// labels sorted by name, so every layer (commit log, filesets, RPC) stores one
// byte string per series and decodes the tags from it when it needs them.
package ident

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/twmb/murmur3"
)

// DefaultNumShards is the number of virtual shards of a new placement.
const DefaultNumShards = 4096

// ErrMalformedID is returned when bytes do not decode as a series ID.
var ErrMalformedID = errors.New("malformed series id")

// MaxLabelLength is the longest label name or value a Prometheus label set
// (labels.Labels) holds: its encoding keeps a string's length in 3 bytes,
// and a longer string silently corrupts the set. Labels refuses an ID
// with a longer one (ErrLabelTooLong), and the write limits keep such IDs
// from being stored (limits.maxLabelValueLength is at most this).
const MaxLabelLength = 1<<24 - 1

// ErrLabelTooLong is returned by Labels for an ID holding a label name or
// value longer than MaxLabelLength: it is well-formed, but PromQL cannot
// represent it.
var ErrLabelTooLong = errors.New("label longer than a Prometheus label set holds")

// FromLabels returns the canonical ID of a label set: two label sets with
// the same pairs, built in any order, get the same ID.
// The encoding is, per label sorted by name: uvarint(len(name)) name
// uvarint(len(value)) value.
func FromLabels(ls labels.Labels) []byte {
	return AppendLabels(nil, ls)
}

// AppendLabels appends the canonical ID of ls to dst.
func AppendLabels(dst []byte, ls labels.Labels) []byte {
	// labels.Labels is always sorted by name (labels.New and the builders
	// sort), so its order is already canonical.
	ls.Range(func(l labels.Label) {
		dst = binary.AppendUvarint(dst, uint64(len(l.Name)))
		dst = append(dst, l.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(l.Value)))
		dst = append(dst, l.Value...)
	})
	return dst
}

// Pair is one label, used where callers hold labels as plain pairs
// (the remote write decoder) and want to avoid building labels.Labels.
type Pair struct{ Name, Value []byte }

// WithoutEmpty removes the pairs whose value is empty, in place, and
// returns the shortened slice. Prometheus treats a label with an empty
// value as absent (its TSDB head drops them before it hashes a series:
// labels.Labels.WithoutEmpty), so {job=""} is {}: every write path drops
// them before the ID is computed, so both spellings are one series. A
// pair with an empty name is kept for validation to refuse, as
// Prometheus' receiver refuses it before its head drops anything.
func WithoutEmpty(pairs []Pair) []Pair {
	for i, p := range pairs {
		if len(p.Value) == 0 && len(p.Name) > 0 {
			out := pairs[:i]
			for _, q := range pairs[i+1:] {
				if len(q.Value) > 0 || len(q.Name) == 0 {
					out = append(out, q)
				}
			}
			clear(pairs[len(out):]) // the request's bytes are not held past it
			return out
		}
	}
	return pairs
}

// AppendPairs appends the canonical ID of pairs to dst, sorting pairs in
// place by name.
func AppendPairs(dst []byte, pairs []Pair) []byte {
	if !sort.SliceIsSorted(pairs, func(i, j int) bool { return string(pairs[i].Name) < string(pairs[j].Name) }) {
		sort.Slice(pairs, func(i, j int) bool { return string(pairs[i].Name) < string(pairs[j].Name) })
	}
	return AppendSortedPairs(dst, pairs)
}

// AppendSortedPairs is AppendPairs for pairs the caller already sorted by
// name (the remote write decoder validates and sorts them itself).
func AppendSortedPairs(dst []byte, pairs []Pair) []byte {
	for _, p := range pairs {
		dst = binary.AppendUvarint(dst, uint64(len(p.Name)))
		dst = append(dst, p.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(p.Value)))
		dst = append(dst, p.Value...)
	}
	return dst
}

// Labels decodes an ID back into its labels.
func Labels(id []byte) (labels.Labels, error) {
	b := labels.NewScratchBuilder(8)
	return LabelsWith(&b, id)
}

// LabelsWith is Labels building with b, which it resets first, so that a
// caller decoding many IDs (a query decodes the labels of every series it
// selects) reuses one builder: every labels implementation copies what it
// keeps out of the builder.
//
// It costs a fixed few allocations per ID rather than two per label:
// names and values are substrings of idString(id), cut at the offsets
// Range's slices have in id.
func LabelsWith(b *labels.ScratchBuilder, id []byte) (labels.Labels, error) {
	return LabelsKeeping(b, id, nil)
}

// LabelsKeeping is LabelsWith keeping only the labels whose name keep
// accepts (all of them when keep is nil); the whole ID is checked as
// LabelsWith checks it. A query that counts a million series by one label
// decodes only that label of each.
func LabelsKeeping(b *labels.ScratchBuilder, id []byte, keep func(name []byte) bool) (labels.Labels, error) {
	if err := addKeeping(b, id, keep); err != nil {
		return labels.EmptyLabels(), err
	}
	return b.Labels(), nil
}

// LabelsKeepingOver is LabelsKeeping writing the labels over *ls in b's
// own buffer (ScratchBuilder.Overwrite), without allocating: *ls is valid
// until b's next use. A worker that only hashes and counts each series'
// labels (a count by over ten million series) makes no garbage for them.
func LabelsKeepingOver(b *labels.ScratchBuilder, id []byte, keep func(name []byte) bool, ls *labels.Labels) error {
	if err := addKeeping(b, id, keep); err != nil {
		return err
	}
	b.Overwrite(ls)
	return nil
}

// addKeeping resets b and adds the labels of id that keep accepts.
func addKeeping(b *labels.ScratchBuilder, id []byte, keep func(name []byte) bool) error {
	b.Reset()
	s := idString(id)
	// sub is the substring of s at p's place in id: p aliases id, and
	// cap(id) - cap(p) is its offset.
	sub := func(p []byte) string {
		k := cap(id) - cap(p)
		return s[k : k+len(p)]
	}
	var tooLong error
	err := Range(id, func(name, value []byte) {
		if len(name) > MaxLabelLength || len(value) > MaxLabelLength {
			if tooLong == nil {
				tooLong = fmt.Errorf("%w: label %.64q has a %d-byte name and a %d-byte value, over %d bytes", ErrLabelTooLong, name, len(name), len(value), MaxLabelLength)
			}
			return
		}
		if keep == nil || keep(name) {
			b.Add(sub(name), sub(value))
		}
	})
	if err == nil {
		err = tooLong
	}
	return err
}

// Range calls fn for every label of id, in name order, without allocating.
// The slices passed to fn alias id.
func Range(id []byte, fn func(name, value []byte)) error {
	for i := 0; i < len(id); {
		name, n, err := field(id[i:])
		if err != nil {
			return fmt.Errorf("%w: label name at byte %d: %v", ErrMalformedID, i, err)
		}
		i += n
		value, n, err := field(id[i:])
		if err != nil {
			return fmt.Errorf("%w: label value at byte %d: %v", ErrMalformedID, i, err)
		}
		i += n
		fn(name, value)
	}
	return nil
}

func field(b []byte) ([]byte, int, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, 0, errors.New("bad length")
	}
	if uint64(len(b)-n) < l {
		return nil, 0, fmt.Errorf("length %d past end", l)
	}
	return b[n : n+int(l)], n + int(l), nil
}

// Shard returns the virtual shard of id: murmur3.Sum32(id) % numShards.
func Shard(id []byte, numShards uint32) uint32 {
	return murmur3.Sum32(id) % numShards
}

// Same says whether two IDs are the same series. Consecutive samples of one
// series usually share their ID's bytes, so identity is checked before the
// bytes: the batch-splitting loops of the write path call this per sample.
func Same(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return string(a) == string(b)
}
