package config

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
)

// Durations in the config are plain time.Duration fields, but their YAML
// accepts what Prometheus users write as well as Go's forms: "7d", "2w",
// "1y", "1d12h" (model.ParseDuration) and "1h30m", "100ms", "1.5h", "-1s"
// (time.ParseDuration). yaml.v3 decodes a time.Duration with
// time.ParseDuration only, so before the strict decode every scalar that
// lands in a time.Duration field is parsed here and rewritten in Go's form
// in place, on its own line, so yaml's line numbers stay true. A bare
// number ("retention: 48") is refused naming the field and suggesting a
// unit, instead of yaml's "cannot unmarshal !!int".

var durationType = reflect.TypeOf(time.Duration(0))

// durationUnits is the hint every duration error ends with.
const durationUnits = "use a unit: ms, s, m, h, d (24h), w (7d), y (365d), e.g. 100ms, 90s, 1h30m, 7d, 2w"

// ParseDuration parses a config duration: Go's time.ParseDuration forms or
// Prometheus' model.ParseDuration forms. A bare number other than 0 is an
// error, since its unit would be a guess.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration; %s", durationUnits)
	}
	if bareNumber.MatchString(s) {
		if strings.Trim(s, "+-0.") == "" {
			return 0, nil
		}
		return 0, fmt.Errorf("%s has no unit: write %[1]ss, %[1]sm, %[1]sh or %[1]sd (%s)", s, durationUnits)
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; %s", s, durationUnits)
	}
	return time.Duration(d), nil
}

var bareNumber = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// addEdit records that scalar n's source text becomes new: its value as
// written, quotes included. A scalar in a style whose source text is not
// its value plus quotes (a block scalar) is left to yaml.
func addEdit(edits *[]edit, n *yaml.Node, new string) {
	old := n.Value
	switch n.Style {
	case yaml.DoubleQuotedStyle:
		old = `"` + n.Value + `"`
	case yaml.SingleQuotedStyle:
		old = `'` + n.Value + `'`
	case 0, yaml.TaggedStyle:
	default:
		return
	}
	*edits = append(*edits, edit{line: n.Line, col: n.Column, old: old, new: new})
}

// edit replaces one scalar's source text.
type edit struct {
	line, col int // 1-based, as yaml.Node reports them
	old, new  string
}

// normalizeDurations returns raw with every duration scalar of a
// Config-shaped document rewritten in Go's form and every byte size
// (bytes.go) as a plain integer, or an error naming the first field whose
// value is neither, or every key that names no field (by path, with a
// did-you-mean: yaml.v3 names the Go type instead).
func normalizeDurations(raw []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return raw, nil // the strict decode reports it, with its context
	}
	var edits []edit
	var unknown []string
	if err := walkDurations(&doc, reflect.TypeOf(Config{}), "", &edits, &unknown); err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(unknown, "; "))
	}
	if len(edits) == 0 {
		return raw, nil
	}
	lines := bytes.Split(raw, []byte("\n"))
	// Right to left within a line, so earlier columns stay valid.
	sort.Slice(edits, func(i, j int) bool {
		if edits[i].line != edits[j].line {
			return edits[i].line < edits[j].line
		}
		return edits[i].col > edits[j].col
	})
	for _, e := range edits {
		if e.line < 1 || e.line > len(lines) {
			continue
		}
		l := lines[e.line-1]
		start := e.col - 1
		if start < 0 || start+len(e.old) > len(l) || string(l[start:start+len(e.old)]) != e.old {
			continue // not where we expect it (odd quoting): leave it to yaml
		}
		var b []byte
		b = append(b, l[:start]...)
		b = append(b, e.new...)
		b = append(b, l[start+len(e.old):]...)
		lines[e.line-1] = b
	}
	return bytes.Join(lines, []byte("\n")), nil
}

// walkDurations follows n along the Go type t and records an edit for
// every scalar that decodes into a time.Duration. path is the field's name
// as Validate spells it (namespaces[0].retention).
func walkDurations(n *yaml.Node, t reflect.Type, path string, edits *[]edit, unknown *[]string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := walkDurations(c, t, path, edits, unknown); err != nil {
				return err
			}
		}
		return nil
	case yaml.AliasNode:
		return nil // decoded from its anchor, which is walked where it stands
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return nil // yaml reports the shape mismatch
		}
		d, err := ParseDuration(n.Value)
		if err != nil {
			return fmt.Errorf("%s: %w (line %d)", path, err, n.Line)
		}
		addEdit(edits, n, d.String())
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			f, ok := fieldByYAMLName(t, key)
			if !ok {
				if key != "<<" { // a merge key: yaml reports what it merges
					*unknown = append(*unknown, unknownKey(t, join(path, key), key, n.Content[i].Line))
				}
				continue
			}
			if isByteSize(f) {
				if err := byteSizeEdit(val, join(path, key), edits); err != nil {
					return err
				}
				continue
			}
			if err := walkDurations(val, f.Type, join(path, key), edits, unknown); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			if err := walkDurations(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), edits, unknown); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := walkDurations(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), edits, unknown); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldByYAMLName finds the struct field yaml.v3 decodes key into: its
// yaml tag's name, or the lowercased field name without one.
func fieldByYAMLName(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct {
			if inner, ok := fieldByYAMLName(f.Type, key); ok {
				return inner, true
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
