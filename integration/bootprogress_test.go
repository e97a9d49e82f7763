package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/bootstrap"
	"github.com/tessera-tsdb/tessera/placement"
)

// readyProgress is a node's /ready: its reason and bootstrap progress.
func readyProgress(url string) (string, *bootstrap.Progress, error) {
	resp, err := http.Get(url + "/ready")
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Reason    string              `json:"reason"`
		Bootstrap *bootstrap.Progress `json:"bootstrap"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return "", nil, fmt.Errorf("/ready %s: %w", b, err)
	}
	return body.Reason, body.Bootstrap, nil
}

var pageSamples = regexp.MustCompile(`data-bootstrap-samples="(\d+)"`)

// TestBootstrapProgressMovesOnReadyAndConsole joins a fourth node whose
// peer streaming is paced (bootstrap.maxBytesPerSecond) to a cluster
// holding the bench workload: while its round runs, its /ready shows the
// samples and bytes streamed so far growing between two reads, and the
// console draws them (two screenshots seconds apart, with different
// numbers).
func TestBootstrapProgressMovesOnReadyAndConsole(t *testing.T) {
	e, nodes, c := clusterN(t, 3)
	writeBench(t, nodes[0].url())
	cfg := nodeConfig(t, "node4", "rack4", e.client)
	cfg.Bootstrap.MaxBytesPerSecond = 2 << 10
	n4 := startNode(t, cfg)
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n4.instance()) })

	var first *bootstrap.Progress
	eventually(t, time.Minute, "node4 streaming", func() error {
		_, p, err := readyProgress(n4.url())
		if err != nil {
			return err
		}
		if p == nil || !p.Running || p.Samples == 0 {
			return fmt.Errorf("progress %+v", p)
		}
		first = p
		return nil
	})
	eventually(t, time.Minute, "node4's progress to move before its round ends", func() error {
		reason, p, err := readyProgress(n4.url())
		if err != nil {
			return err
		}
		if p == nil || !p.Running {
			return fmt.Errorf("the round ended before a second reading: %+v (%s)", p, reason)
		}
		if p.Samples <= first.Samples || p.Bytes <= first.Bytes {
			return fmt.Errorf("still %d samples, %d bytes", p.Samples, p.Bytes)
		}
		require.Contains(t, reason, "shards streamed this round")
		t.Logf("/ready: %s", reason)
		return nil
	})

	bin := chromiumPath(t)
	url := n4.url() + "/"
	// The page draws progress once its first poll answered; on a loaded
	// machine that can take longer than Chromium's virtual time budget, so
	// a page without it yet is loaded again.
	// shot returns the samples the page shows, false when the round ended
	// before the page showed any (only allowed of the second shot).
	shot := func(name string, mustDraw bool) (int64, bool) {
		var n int64
		drawn := false
		eventually(t, 2*time.Minute, "the console draws node4's bootstrap progress", func() error {
			dom, err := runChromium(t, bin, url, "--dump-dom")
			if err != nil {
				return err
			}
			if m := pageSamples.FindSubmatch(dom); m != nil {
				drawn = true
				_, err = fmt.Sscan(string(m[1]), &n)
				return err
			}
			if _, p, err := readyProgress(n4.url()); !mustDraw && err == nil && (p == nil || !p.Running) {
				return nil // the round is over: nothing left to draw
			}
			return fmt.Errorf("no data-bootstrap-samples in the page")
		})
		screenshot(t, bin, url, name)
		return n, drawn
	}
	a, _ := shot("bootstrap-1.png", true)
	b, drawn := shot("bootstrap-2.png", false)
	if _, p, err := readyProgress(n4.url()); drawn && err == nil && p != nil && p.Running {
		require.Greater(t, b, a, "the console's numbers moved between two shots")
	}
}
