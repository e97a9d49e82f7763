package promapi

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// minTime and maxTime are Prometheus' defaults for an open time range
// (web/api/v1 MinTime and MaxTime): the widest range whose RFC 3339 form
// still has a four-digit year.
var (
	minTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	maxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()

	minTimeFormatted = minTime.Format(time.RFC3339Nano)
	maxTimeFormatted = maxTime.Format(time.RFC3339Nano)
)

// parseTime accepts unix seconds as a float (rounded to the millisecond)
// or RFC 3339, as Prometheus does. A float must lie within [minTime,
// maxTime]: NaN, an infinity or a larger number would convert to an
// arbitrary instant (int64(NaN) is the minimum on amd64) and be answered.
func parseTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil {
		if !(t >= float64(minTime.Unix()) && t <= float64(maxTime.Unix())) {
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp: outside [%s, %s]", s, minTimeFormatted, maxTimeFormatted)
		}
		s, ns := math.Modf(t)
		ns = math.Round(ns*1000) / 1000
		return time.Unix(int64(s), int64(ns*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	switch s {
	case minTimeFormatted:
		return minTime, nil
	case maxTimeFormatted:
		return maxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// timeParam parses an optional time parameter.
func timeParam(v, name string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	t, err := parseTime(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid time value for '%s': %w", name, err)
	}
	return t, nil
}

// parseDuration accepts float seconds or a Prometheus duration (5m, 1h30m).
func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(ts), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

// parseLimit parses ?limit=; 0 means none.
func parseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	limit, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if limit < 0 {
		return 0, errors.New("limit must be non-negative")
	}
	return limit, nil
}

// hintLimit asks storage for one more than the limit so that truncation
// can be reported.
func hintLimit(limit int) int {
	if limit > 0 && limit < math.MaxInt {
		return limit + 1
	}
	return limit
}

// parseMatchers parses match[] selectors. Each set must have a matcher
// that rejects the empty value, or it would select every series.
func parseMatchers(p parser.Parser, sels []string) ([][]*labels.Matcher, error) {
	sets, err := p.ParseMetricSelectors(sels)
	if err != nil {
		return nil, err
	}
outer:
	for _, ms := range sets {
		for _, m := range ms {
			if m != nil && !m.Matches("") {
				continue outer
			}
		}
		return nil, errors.New("match[] must contain at least one non-empty matcher")
	}
	return sets, nil
}
