package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/console"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/tessera-tsdb/tessera/placement/cli"
)

func getConsole(url string) (console.Cluster, error) {
	var out console.Cluster
	resp, err := http.Get(url + console.Path)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("%s: %d %s", console.Path, resp.StatusCode, b)
	}
	return out, json.Unmarshal(b, &out)
}

// TestConsoleClusterJSON reads the console's JSON from every node of a
// three-node cluster: the shard counts per state of every instance are
// the placement's, every instance was probed healthy and ready, and the
// ingest rate moves when writes arrive.
func TestConsoleClusterJSON(t *testing.T) {
	e, nodes, _ := clusterN(t, 3)
	want := placementFromCLI(t, e.client)
	for _, n := range nodes {
		got, err := getConsole(n.url())
		require.NoError(t, err)
		require.Equal(t, n.cfg.ID, got.Self)
		require.Equal(t, "etcd", got.PlacementSource, got.PlacementError)
		require.NotNil(t, got.Placement)
		require.Equal(t, want.Version, got.Placement.Version)
		require.Equal(t, want.NumShards, got.Placement.NumShards)
		require.Equal(t, placement.MovingShards(want), got.Placement.Moving)
		require.Len(t, got.Instances, len(want.Instances))
		for _, in := range got.Instances {
			wi, ok := want.Instance(in.ID)
			require.True(t, ok, in.ID)
			c := wi.CountByState()
			require.Equal(t, map[string]int{
				"INITIALIZING": c[placement.Initializing],
				"AVAILABLE":    c[placement.Available],
				"LEAVING":      c[placement.Leaving],
			}, in.Counts, in.ID)
			require.Len(t, in.Shards, int(want.NumShards))
			for _, s := range wi.Shards {
				require.Equal(t, s.State.String()[:1], in.Shards[s.ID:s.ID+1], "%s shard %d", in.ID, s.ID)
			}
			require.True(t, in.Health.OK, "%s health: %+v", in.ID, in.Health)
			require.True(t, in.Ready.OK, "%s ready: %+v", in.ID, in.Ready)
		}
		require.JSONEq(t, `{"enabled":true,"targets":[]}`, string(got.Hints))
	}

	// Rates: two readings at least 1.5 s apart with writes between them.
	d := newDataset()
	ts := time.Now().UnixMilli()
	eventually(t, 60*time.Second, "an ingest rate", func() error {
		ts++
		if err := d.write(nodes[0].url(), 0, 50, ts); err != nil {
			return err
		}
		got, err := getConsole(nodes[0].url())
		if err != nil {
			return err
		}
		if !got.Rates.Known || got.Rates.IngestSamplesPerSecond <= 0 || got.Rates.StoredSamplesPerSecond <= 0 {
			return fmt.Errorf("rates %+v", got.Rates)
		}
		return nil
	})
}

// placementFromCLI is what `tessera placement get -o json` prints.
func placementFromCLI(t *testing.T, etcd string) placement.Placement {
	cmd := cli.NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"get", "--endpoints", etcd, "-o", "json", "--timeout", "20s"})
	require.NoError(t, cmd.Execute())
	var p placement.Placement
	require.NoError(t, json.Unmarshal(out.Bytes(), &p), out.String())
	return p
}

// chromiumPath finds Debian's chromium. Missing, the browser test skips,
// except in CI (CI set), where it fails: .ci/run installs it.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install -y chromium); CI must run the console's browser test")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); set CI=true to make this a failure")
	return ""
}

// runChromium runs one headless chromium command against url and returns
// its standard output.
func runChromium(t *testing.T, bin, url string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=10000"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("chromium %v: %w\n%s", args, err, lastBytes(stderr.Bytes(), 2000))
	}
	return stdout.Bytes(), nil
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

var (
	instanceTag = regexp.MustCompile(`<div class="instance( down)?"[^>]*>`)
	dataAttr    = regexp.MustCompile(`data-([a-z]+)="([^"]*)"`)
	bodyLoaded  = regexp.MustCompile(`<body[^>]*data-loaded="1"[^>]*>`)
	bodyVersion = regexp.MustCompile(`<body[^>]*data-version="(\d+)"`)
)

func flag(s string) int {
	if s == "true" {
		return 1
	}
	return 0
}

// consoleCounts parses the instances the page drew from its DOM: id ->
// state -> count (and healthy, ready: 1 or 0), and the placement version
// it shows.
func consoleCounts(dom []byte) (map[string]map[string]int, int64, error) {
	if !bodyLoaded.Match(dom) {
		return nil, 0, errors.New("page has not loaded the cluster (body data-loaded is not 1)")
	}
	m := bodyVersion.FindSubmatch(dom)
	if m == nil {
		return nil, 0, errors.New("no data-version on body")
	}
	version, _ := strconv.ParseInt(string(m[1]), 10, 64)
	out := map[string]map[string]int{}
	for _, tag := range instanceTag.FindAll(dom, -1) {
		attrs := map[string]string{}
		for _, a := range dataAttr.FindAllSubmatch(tag, -1) {
			attrs[string(a[1])] = string(a[2])
		}
		counts := map[string]int{}
		for _, st := range []string{"initializing", "available", "leaving"} {
			n, err := strconv.Atoi(attrs[st])
			if err != nil {
				return nil, 0, fmt.Errorf("instance %q: data-%s=%q", attrs["instance"], st, attrs[st])
			}
			counts[st] = n
		}
		counts["healthy"], counts["ready"] = flag(attrs["healthy"]), flag(attrs["ready"])
		counts["down"] = flag(attrs["down"])
		out[attrs["instance"]] = counts
	}
	return out, version, nil
}

// TestConsoleInChromium loads the console of a three-node cluster in a
// real headless Chromium: the shard counts it shows for every instance
// are those `tessera placement get` reports, and a screenshot of it is
// saved (in the test's temp dir; also in $TESSERA_CONSOLE_SCREENSHOT_DIR
// when set, to keep it).
func TestConsoleInChromium(t *testing.T) {
	bin := chromiumPath(t)
	e, nodes, ec := clusterN(t, 3)
	url := nodes[1].url() + "/"
	pageMatches(t, bin, url, e.client, nil)
	screenshot(t, bin, url, "console.png")

	// A fourth instance that never starts: its shards stay INITIALIZING
	// and their old copies LEAVING (moving, drawn highlighted), and its
	// probes fail. The page still shows exactly what placement get says.
	down := placement.Instance{ID: "node4", IsolationGroup: "rack4", Zone: "z", Weight: 1,
		Endpoint: freePort(t), HTTPEndpoint: freePort(t)}
	casPlacement(t, ec, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, down) })
	p := pageMatches(t, bin, url, e.client, map[string]bool{"node4": true})
	require.Positive(t, placement.MovingShards(p))
	screenshot(t, bin, url, "console-moving.png")

	// Remove node4 from the page, as an operator would: the form, the
	// confirmation dialog (first cancelled: nothing changes), then the
	// placement API. Its shards were all INITIALIZING, so the remove undoes
	// the add without force.
	b := startBrowser(t, bin, url)
	b.eval(t, pageHelpers+`(async () => {
  await until(() => document.body.dataset.loaded === "1", "the page to load");
  const f = document.querySelector('form[data-action="remove"]');
  f.elements.id.value = "node4";
  f.requestSubmit();
  await until(() => document.getElementById("confirm").open, "the confirmation dialog");
  document.querySelector('#confirm button[value="cancel"]').click();
  await until(() => document.getElementById("action-result").textContent === "cancelled", "cancelled");
  return true;
})()`, nil)
	require.Equal(t, p.Version, placementFromCLI(t, e.client).Version, "a cancelled change changed the placement")
	var res struct {
		Shown  string `json:"shown"`
		Result string `json:"result"`
	}
	b.eval(t, pageHelpers+`(async () => {
  const f = document.querySelector('form[data-action="remove"]');
  f.requestSubmit();
  await until(() => document.getElementById("confirm").open, "the confirmation dialog");
  const shown = document.getElementById("confirm-text").textContent;
  document.getElementById("confirm-ok").click();
  const out = document.getElementById("action-result");
  await until(() => /^\d{3}: /.test(out.textContent), "the placement API's answer");
  return { shown, result: out.textContent };
})()`, &res)
	require.Equal(t, "DELETE /api/v1/services/tessera/placement/node4", res.Shown)
	require.Regexp(t, `^200: done: placement version \d+$`, res.Result)
	after := placementFromCLI(t, e.client)
	_, still := after.Instance("node4")
	require.False(t, still, "node4 still in the placement after the page removed it")
	require.Zero(t, placement.MovingShards(after))
	pageMatches(t, bin, url, e.client, nil)
}

// pageMatches waits until the page at url shows, for every instance, the
// shard counts per state that `tessera placement get` reports, and every
// instance healthy and ready but those in down, which it draws down; it
// returns the placement.
func pageMatches(t *testing.T, bin, url, etcd string, down map[string]bool) placement.Placement {
	want := placementFromCLI(t, etcd)
	wantCounts := map[string]map[string]int{}
	for _, in := range want.Instances {
		c := in.CountByState()
		up := 1
		if down[in.ID] {
			up = 0
		}
		wantCounts[in.ID] = map[string]int{"initializing": c[placement.Initializing],
			"available": c[placement.Available], "leaving": c[placement.Leaving], "healthy": up, "ready": up,
			"down": 1 - up} // a node that does not answer is drawn down, its shards unavailable
	}
	eventually(t, 3*time.Minute, "the console shows the placement's shard counts", func() error {
		dom, err := runChromium(t, bin, url, "--dump-dom")
		if err != nil {
			return err
		}
		got, version, err := consoleCounts(dom)
		if err != nil {
			return err
		}
		if version != want.Version {
			return fmt.Errorf("page shows placement version %d, want %d", version, want.Version)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantCounts) {
			return fmt.Errorf("page shows %v, placement get says %v", got, wantCounts)
		}
		return nil
	})
	return want
}

// screenshot saves the page as name in the test's temp dir (and in
// $TESSERA_CONSOLE_SCREENSHOT_DIR when set, to keep it) and logs where.
func screenshot(t *testing.T, bin, url, name string) {
	shot := filepath.Join(t.TempDir(), name)
	_, err := runChromium(t, bin, url, "--screenshot="+shot, "--window-size=1280,1100", "--hide-scrollbars")
	require.NoError(t, err)
	png, err := os.ReadFile(shot)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "screenshot is not a PNG")
	require.Greater(t, len(png), 10_000, "screenshot of %d bytes: a blank page?", len(png))
	t.Logf("console screenshot: %s (%d bytes)", shot, len(png))
	if dir := os.Getenv("TESSERA_CONSOLE_SCREENSHOT_DIR"); dir != "" {
		keep := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(keep, png, 0o644))
		t.Logf("console screenshot kept at %s", keep)
	}
}
