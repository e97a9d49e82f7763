package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/alecthomas/units"
	"gopkg.in/yaml.v3"
)

// Byte sizes in the config are plain integer fields tagged `unit:"bytes"`,
// and their YAML takes what Prometheus users write for
// --storage.tsdb.retention.size: 512MiB, 1GiB, 64KB (KB and KiB both 1024,
// Prometheus' rule, alecthomas/units.ParseBase2Bytes), or a plain number of
// bytes as before. Like durations, each such scalar is rewritten in place
// as its integer before the strict decode, so the fields stay int64 and
// yaml's line numbers stay true.

const byteUnits = "use a number of bytes or a unit: B, KiB, MiB, GiB, TiB (KB, MB, GB, TB mean the same, as in Prometheus), e.g. 512MiB, 1GiB"

// isByteSize says whether the config field holds a size in bytes.
func isByteSize(f reflect.StructField) bool {
	switch f.Type.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return f.Tag.Get("unit") == "bytes"
	}
	return false
}

// ParseByteSize parses a config byte size: a plain integer, or a number
// with a base-2 unit.
func ParseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	b, err := units.ParseBase2Bytes(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte size; %s", s, byteUnits)
	}
	return int64(b), nil
}

// byteSizeEdit records the rewrite of one byte-size scalar.
func byteSizeEdit(n *yaml.Node, path string, edits *[]edit) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return nil // yaml reports the shape mismatch
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("%s: %w (line %d)", path, err, n.Line)
	}
	addEdit(edits, n, strconv.FormatInt(v, 10))
	return nil
}

// unknownKey says that key at path names no field of t, and which field
// it most likely meant.
func unknownKey(t reflect.Type, path, key string, line int) string {
	msg := fmt.Sprintf("%s: unknown field (line %d)", path, line)
	if best := closest(key, yamlNames(t)); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg
}

// yamlNames lists the keys a struct type takes, inline fields' included.
func yamlNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct {
			names = append(names, yamlNames(f.Type)...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// closest returns the candidate nearest to key by edit distance
// (case-insensitive) when it is near enough to be a typo: at most a third
// of the key's length, and always 1.
func closest(key string, candidates []string) string {
	best, bestD := "", max(1, len(key)/3)+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(key), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
