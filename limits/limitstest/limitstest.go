// Package limitstest reads the limits' refusal counters in tests.
package limitstest

import "github.com/uber-go/tally/v4"

// Refused is the count of refusals of limit (a config field name such as
// limits.ActiveSeries) recorded in scope, whose "limits" sub-scope was
// given to limits.New.
func Refused(scope tally.TestScope, limit string) int64 {
	var n int64
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == "limits.refused" && c.Tags()["limit"] == limit {
			n += c.Value()
		}
	}
	return n
}
