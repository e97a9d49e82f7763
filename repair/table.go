package repair

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// FetchStatus asks the node at baseURL (http://host:port) for its repair
// status.
func FetchStatus(ctx context.Context, c *http.Client, baseURL string) (Status, error) {
	url := strings.TrimRight(baseURL, "/") + StatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Status{}, fmt.Errorf("bad --url %q: %w", baseURL, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Status{}, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Status{}, fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return Status{}, fmt.Errorf("GET %s: not a repair status: %w", url, err)
	}
	return st, nil
}

// WriteTable prints a status for people: the pass, then one line per
// shard (all of them with verbose, else only those that differed or
// failed).
func WriteTable(w io.Writer, st Status, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	mode := "repair"
	switch {
	case !st.Enabled:
		mode = "disabled"
	case st.CompareOnly:
		mode = "compare-only"
	}
	state := "idle"
	if st.Running {
		state = "running"
	}
	fmt.Fprintf(tw, "mode:\t%s (every %v), %s\n", mode, st.Every, state)
	p := st.Pass
	if p.Number > 0 {
		end := "in progress"
		if !p.Finished.IsZero() {
			end = "finished " + p.Finished.UTC().Format(time.RFC3339) + ", took " + p.Finished.Sub(p.Started).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "pass:\t#%d started %s, %s; %d/%d shards\n", p.Number, p.Started.UTC().Format(time.RFC3339), end, p.ShardsDone, p.ShardsTotal)
		fmt.Fprintf(tw, "this pass:\t%d blocks compared, %d differing; %d series differing, %d repaired (%d samples); %d bytes; %d errors\n",
			p.BlocksCompared, p.BlocksDiffering, p.SeriesDiffering, p.SeriesRepaired, p.SamplesRepaired, p.Bytes, p.Errors)
	} else {
		fmt.Fprintf(tw, "pass:\tnone yet\n")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "NAMESPACE\tSHARD\tPASS\tAT\tBLOCKS\tDIFFERING\tSERIES DIFFERING\tREPAIRED\tSAMPLES\tBYTES\tERROR")
	shown := 0
	for _, s := range st.Shards {
		if !verbose && s.BlocksDiffering == 0 && s.Error == "" {
			continue
		}
		shown++
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Namespace, s.Shard, s.Pass,
			s.At.UTC().Format(time.RFC3339), s.BlocksCompared, s.BlocksDiffering, s.SeriesDiffering,
			s.SeriesRepaired, s.SamplesRepaired, s.Bytes, s.Error)
	}
	if hidden := len(st.Shards) - shown; hidden > 0 {
		fmt.Fprintf(tw, "(%d shards agreeing at their last comparison not shown; -v shows them)\n", hidden)
	}
	return tw.Flush()
}
