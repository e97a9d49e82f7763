package rpc

import (
	"sync"

	"github.com/prometheus/prometheus/model/labels"
)

// regexCache holds the regular expression matchers of recent requests,
// compiled: a dashboard asks every replica the same few selectors again
// and again (each part of a pushed-down query, each refresh), and
// compiling a regular expression costs more than answering a small
// query's part. A labels.Matcher is immutable once made, so requests
// share them. Bounded: when full it starts over.
var regexCache = struct {
	sync.Mutex
	m     map[Matcher]*labels.Matcher
	bytes int // of the names and values held
}{m: map[Matcher]*labels.Matcher{}}

// regexCacheMax and regexCacheMaxBytes bound regexCache: its entries,
// and the bytes of their names and values (a Grafana variable's
// alternation can be long; the compiled form is of the same order).
const (
	regexCacheMax      = 1024
	regexCacheMaxBytes = 4 << 20
)

// newMatcher is labels.NewMatcher for m, from regexCache for a regular
// expression seen recently. Equality matchers are cheap: never cached.
func newMatcher(m Matcher) (*labels.Matcher, error) {
	t := labels.MatchType(m.Type)
	if t != labels.MatchRegexp && t != labels.MatchNotRegexp {
		return labels.NewMatcher(t, m.Name, m.Value)
	}
	regexCache.Lock()
	lm := regexCache.m[m]
	regexCache.Unlock()
	if lm != nil {
		return lm, nil
	}
	lm, err := labels.NewMatcher(t, m.Name, m.Value)
	if err != nil {
		return nil, err
	}
	size := len(m.Name) + len(m.Value)
	if size > regexCacheMaxBytes/16 {
		return lm, nil
	}
	regexCache.Lock()
	if len(regexCache.m) >= regexCacheMax || regexCache.bytes+size > regexCacheMaxBytes {
		clear(regexCache.m)
		regexCache.bytes = 0
	}
	if _, ok := regexCache.m[m]; !ok {
		regexCache.m[m] = lm
		regexCache.bytes += size
	}
	regexCache.Unlock()
	return lm, nil
}
