package limits

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/tessera-tsdb/tessera/ident"
)

// CheckLabels validates the labels of one series, sorted by name:
// Prometheus' rules (a non-empty __name__; names non-empty, unique and
// valid UTF-8; values valid UTF-8) and the label limits. Remote write
// calls it on every series it has not seen before; a series it has seen
// was checked then.
func (l *Limits) CheckLabels(pairs []ident.Pair) error {
	c := checker{l: l, cfg: l.Config()}
	for _, p := range pairs {
		if c.add(p.Name, p.Value); c.err != nil {
			break
		}
	}
	return c.finish(func(fn func(name, value []byte)) {
		for _, p := range pairs {
			fn(p.Name, p.Value)
		}
	})
}

// CheckLabelCount refuses a series of more labels than
// MaxLabelNamesPerSeries before its labels are sorted or looked at: a
// request may carry 100,000 labels in reverse order, and sorting them
// would cost more than refusing them.
func (l *Limits) CheckLabelCount(pairs []ident.Pair) error {
	c := l.Config()
	if c.MaxLabelNamesPerSeries > 0 && len(pairs) > c.MaxLabelNamesPerSeries {
		return l.Refuse(LabelNamesPerSeries, http.StatusBadRequest,
			"series with %d labels exceeds %s=%d (series %s)", len(pairs), LabelNamesPerSeries, c.MaxLabelNamesPerSeries,
			describe(func(fn func(name, value []byte)) {
				for _, p := range pairs {
					fn(p.Name, p.Value)
				}
			}))
	}
	return nil
}

// CheckID validates a canonical series ID as CheckLabels does its labels,
// and that it is canonical (well-formed, labels sorted by name). The node
// RPC server calls it on every series a peer writes, so the RPC port takes
// only what HTTP would.
func (l *Limits) CheckID(id []byte) error {
	c := checker{l: l, cfg: l.Config()}
	if err := ident.Range(id, c.add); err != nil {
		return &Error{Status: http.StatusBadRequest, Msg: err.Error()}
	}
	return c.finish(func(fn func(name, value []byte)) { _ = ident.Range(id, fn) })
}

// checker walks one series' labels in name order and keeps the first
// problem.
type checker struct {
	l       *Limits
	cfg     Config
	n       int
	prev    []byte
	hasName bool
	err     *Error
	// rule is a broken Prometheus rule, reported without the series
	// (which finish appends).
	rule error
}

func (c *checker) add(name, value []byte) {
	if c.err != nil || c.rule != nil {
		return
	}
	c.n++
	switch {
	case len(name) == 0:
		c.rule = errors.New("empty label name")
	case !utf8.Valid(name):
		c.rule = fmt.Errorf("label name %q is not valid UTF-8", truncate(name, 64))
	case !utf8.Valid(value):
		c.rule = fmt.Errorf("label %s: value %q is not valid UTF-8", truncate(name, 64), truncate(value, 64))
	case c.prev != nil && bytes.Equal(name, c.prev):
		c.rule = fmt.Errorf("duplicate label name %q", truncate(name, 64))
	case c.prev != nil && bytes.Compare(name, c.prev) < 0:
		c.rule = fmt.Errorf("label %q not sorted after %q", truncate(name, 64), truncate(c.prev, 64))
	case c.cfg.MaxLabelNameLength > 0 && len(name) > c.cfg.MaxLabelNameLength:
		c.err = c.l.Refuse(LabelNameLength, http.StatusBadRequest,
			"label name of %d bytes %q exceeds %s=%d", len(name), truncate(name, 64), LabelNameLength, c.cfg.MaxLabelNameLength)
	case c.cfg.MaxLabelValueLength > 0 && len(value) > c.cfg.MaxLabelValueLength:
		c.err = c.l.Refuse(LabelValueLength, http.StatusBadRequest,
			"value of label %q of %d bytes exceeds %s=%d", truncate(name, 64), len(value), LabelValueLength, c.cfg.MaxLabelValueLength)
	case len(name) > MaxRepresentable || len(value) > MaxRepresentable:
		// Only reachable with the length limits off: PromQL could not
		// read such a label back.
		c.rule = fmt.Errorf("label %q: name or value of more than %d bytes", truncate(name, 64), MaxRepresentable)
	}
	if string(name) == "__name__" {
		c.hasName = len(value) > 0
	}
	c.prev = name
}

// finish reports the first problem with the series (described by walk),
// or too many labels, or a missing __name__.
func (c *checker) finish(walk func(fn func(name, value []byte))) error {
	series := func() string { return describe(walk) }
	switch {
	case c.rule != nil:
		return &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("%v (series %s)", c.rule, series())}
	case c.err != nil:
		c.err.Msg += " (series " + series() + ")"
		return c.err
	case c.n == 0:
		return &Error{Status: http.StatusBadRequest, Msg: "series has no labels (a label with an empty value is no label, as in Prometheus)"}
	case c.cfg.MaxLabelNamesPerSeries > 0 && c.n > c.cfg.MaxLabelNamesPerSeries:
		return c.l.Refuse(LabelNamesPerSeries, http.StatusBadRequest,
			"series with %d labels exceeds %s=%d (series %s)", c.n, LabelNamesPerSeries, c.cfg.MaxLabelNamesPerSeries, series())
	case !c.hasName:
		return &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("series has no __name__ label, or an empty one (labels: %s)", series())}
	}
	return nil
}
