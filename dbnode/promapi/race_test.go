//go:build race

package promapi

// raceEnabled: the race detector slows HTTP round trips ten- to
// twentyfold; tests that compare thousands of requests take a sample.
const raceEnabled = true
