package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The node_exporter workload through the CLI, against a real node: the
// write prints the start to query with, and `bench queries` with that
// start answers every query, the same node compared with itself agreeing.
func TestBenchNodeExporterAndQueries(t *testing.T) {
	n := startNode(t)
	url := "http://" + n.http
	out, err := exec.Command(binary, "bench", "--workload", "nodeexporter", "--hosts", "2", "--url", url).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "0 failed samples")
	m := regexp.MustCompile(`--start (\d+)`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "the write says which start to query: %s", out)

	out, err = exec.Command(binary, "bench", "queries", "--url", url, "--start", m[1], "--rounds", "2", "--compare", url).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "geomean")
	require.Equal(t, 11, strings.Count(string(out), " agree: "), "%s", out)
}

// Input the bench cannot act on is refused with what to change, before
// anything is sent.
func TestBenchBadInput(t *testing.T) {
	for args, want := range map[string]string{
		"bench --workload nope":                        `unknown --workload "nope"`,
		"bench --hosts 3":                              "--hosts applies to --workload nodeexporter only",
		"bench --workload nodeexporter --series 5":     "--series does not apply to --workload nodeexporter",
		"bench --workload nodeexporter --verify":       "--verify does not apply",
		"bench --workload nodeexporter --hosts 0":      "--hosts, --batch and --concurrency must be > 0",
		"bench --workload nodeexporter --protocol 2":   "remote write 1.0 only",
		"bench queries":                                "--start (ms) is required",
		"bench queries --start 1 --rounds 0":           "--rounds must be > 0",
		"bench queries --start 1 --url 127.0.0.1:8428": "is not an http(s) URL",
		"bench queries --start 1 --only rate,nope":     `no query named "nope"`,
		"bench queries --start 1 --url http://x extra": "unknown command",
	} {
		out, err := exec.Command(binary, strings.Fields(args)...).CombinedOutput()
		require.Error(t, err, args)
		require.Contains(t, string(out), want, args)
	}
}
