package rpc

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// TestNewMatcherCachesRegexps: a regular expression matcher asked for
// again is the one compiled before, and matches as a fresh one does;
// equality matchers and invalid expressions are not cached.
func TestNewMatcherCachesRegexps(t *testing.T) {
	re := Matcher{Type: uint8(labels.MatchRegexp), Name: "job", Value: "node|api.*"}
	a, err := newMatcher(re)
	require.NoError(t, err)
	b, err := newMatcher(re)
	require.NoError(t, err)
	require.Same(t, a, b)
	for v, want := range map[string]bool{"node": true, "api-1": true, "nodes": false, "": false} {
		require.Equal(t, want, b.Matches(v), v)
	}
	nre := re
	nre.Type = uint8(labels.MatchNotRegexp)
	c, err := newMatcher(nre)
	require.NoError(t, err)
	require.NotSame(t, a, c)
	require.False(t, c.Matches("node"))

	eq := Matcher{Type: uint8(labels.MatchEqual), Name: "job", Value: "node"}
	e1, err := newMatcher(eq)
	require.NoError(t, err)
	e2, err := newMatcher(eq)
	require.NoError(t, err)
	require.NotSame(t, e1, e2)

	_, err = newMatcher(Matcher{Type: uint8(labels.MatchRegexp), Name: "job", Value: "("})
	require.Error(t, err)
	regexCache.Lock()
	_, cached := regexCache.m[Matcher{Type: uint8(labels.MatchRegexp), Name: "job", Value: "("}]
	regexCache.Unlock()
	require.False(t, cached)
}
