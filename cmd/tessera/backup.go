package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/thanos-io/objstore"

	"github.com/tessera-tsdb/tessera/backup"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/internal/clientsec"
	"github.com/tessera-tsdb/tessera/placement"
)

// nodeFlags are the flags of commands that talk to a node over HTTP.
type nodeFlags struct {
	url     string
	timeout time.Duration
	sec     clientsec.Security
}

func (f *nodeFlags) add(cmd *cobra.Command, timeout time.Duration) {
	cmd.Flags().StringVar(&f.url, "url", "http://127.0.0.1:7201", "a node's base URL (the placement is read from it)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", timeout, "give up after this long (0: never)")
	securityFlags(cmd.Flags(), &f.sec)
}

func (f *nodeFlags) client() (*http.Client, error) {
	f.sec.CredentialsFromEnv()
	rt, err := f.sec.Wrap(http.DefaultTransport.(*http.Transport).Clone())
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt}, nil
}

func (f *nodeFlags) scheme() string {
	if strings.HasPrefix(f.url, "https://") {
		return "https"
	}
	return "http"
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// snapshotCommand is `tessera snapshot create|list|delete`: one node's
// online snapshots (docs/backup.md).
func snapshotCommand() *cobra.Command {
	root := &cobra.Command{Use: "snapshot", Short: "Online snapshots of one node's data (admin role)"}
	var nf nodeFlags
	do := func(cmd *cobra.Command, method, path string, body any) error {
		c, err := nf.client()
		if err != nil {
			return err
		}
		ctx, cancel := withTimeout(cmd.Context(), nf.timeout)
		defer cancel()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(nf.url, "/")+path, rd)
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %s %s", method, path, resp.Status, strings.TrimSpace(string(b)))
		}
		_, err = cmd.OutOrStdout().Write(b)
		return err
	}
	var id string
	create := &cobra.Command{Use: "create", Short: "Take a snapshot of the node at --url", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return do(cmd, http.MethodPost, backup.SnapshotPath, map[string]string{"id": id})
		}}
	create.Flags().StringVar(&id, "id", "", "snapshot ID (default: the time)")
	list := &cobra.Command{Use: "list", Short: "List the snapshots of the node at --url", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return do(cmd, http.MethodGet, backup.SnapshotsPath, nil) }}
	del := &cobra.Command{Use: "delete ID", Short: "Delete a snapshot of the node at --url", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return do(cmd, http.MethodDelete, backup.SnapshotsPath+"/"+args[0], nil)
		}}
	for _, c := range []*cobra.Command{create, list, del} {
		nf.add(c, time.Minute)
		root.AddCommand(c)
	}
	return root
}

// bucketFlags name the bucket configuration file.
type bucketFlags struct{ file string }

func (f *bucketFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.file, "bucket-config", "", "objstore bucket configuration YAML (type: S3 or FILESYSTEM, config: ...)")
	_ = cmd.MarkFlagRequired("bucket-config")
}

func (f *bucketFlags) open() (objstore.Bucket, []byte, error) {
	conf, err := os.ReadFile(f.file)
	if err != nil {
		return nil, nil, fmt.Errorf("--bucket-config: %w", err)
	}
	b, err := backup.NewBucket(conf)
	if err != nil {
		return nil, nil, fmt.Errorf("--bucket-config %s: %w", f.file, err)
	}
	return b, conf, nil
}

// parseBytes parses a byte count: 1048576, 512KiB, 10MiB, 1GiB, 5MB.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a byte count (e.g. 10MiB, 500KB, 1048576)", s)
	}
	return int64(v * float64(mult)), nil
}

// backupCommand is `tessera backup create|list|verify|prune|restore`.
func backupCommand() *cobra.Command {
	root := &cobra.Command{Use: "backup", Short: "Cluster backups in object storage (docs/backup.md)"}
	root.AddCommand(backupCreateCommand(), backupListCommand(), backupVerifyCommand(), backupPruneCommand(), backupRestoreCommand())
	return root
}

func backupCreateCommand() *cobra.Command {
	var (
		nf          nodeFlags
		bf          bucketFlags
		id, rate    string
		concurrency int
		output      string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Back up every shard once, from one AVAILABLE replica, to the bucket",
		Long: `Back up the cluster the node at --url belongs to: each shard from one
healthy AVAILABLE replica, each node uploading from a snapshot of its own.
Parts already in the bucket (from an earlier backup) are referenced, not
uploaded again. The manifest is written last; a run that fails leaves none:
run it again with the same --id to resume.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			bps, err := parseBytes(rate)
			if err != nil {
				return fmt.Errorf("--rate-limit: %w", err)
			}
			if id == "" {
				id = time.Now().UTC().Format("20060102T150405Z")
			}
			b, conf, err := bf.open()
			if err != nil {
				return err
			}
			defer b.Close()
			c, err := nf.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), nf.timeout)
			defer cancel()
			p, err := backup.FetchPlacement(ctx, c, nf.url)
			if err != nil {
				return err
			}
			errw := cmd.ErrOrStderr()
			var mu sync.Mutex
			last := map[string]time.Time{}
			m, err := backup.Create(ctx, b, backup.CreateOptions{ID: id, BucketConfig: conf, Placement: p, Client: c,
				Scheme: nf.scheme(), BytesPerSecond: bps, Concurrency: concurrency,
				Progress: func(node string, pr backup.Progress) {
					mu.Lock()
					defer mu.Unlock()
					if time.Since(last[node]) < 2*time.Second {
						return
					}
					last[node] = time.Now()
					fmt.Fprintf(errw, "%s: %d/%d parts, %d uploaded (%s), %d already in the bucket (%d of unchanged volumes, not read)\n",
						node, pr.Done, pr.Parts, pr.Uploaded, human(pr.BytesUploaded), pr.Skipped, pr.Reused)
				}})
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), m)
			}
			took := time.Duration(m.FinishedMs-m.StartedMs) * time.Millisecond
			fmt.Fprintf(cmd.OutOrStdout(), "backup %s: %d shards, %d parts (%s), %d flushed samples; uploaded %d parts (%s), %d already in the bucket (%d of volumes unchanged since %q, not read); took %v\n",
				m.ID, len(m.Shards), m.Totals.Objects, human(m.Totals.Bytes), m.Totals.Samples,
				m.Totals.UploadedObjects, human(m.Totals.UploadedBytes), m.Totals.Objects-m.Totals.UploadedObjects,
				m.Totals.ReusedObjects, m.Previous, took.Round(time.Millisecond))
			return nil
		},
	}
	nf.add(cmd, 0)
	bf.add(cmd)
	cmd.Flags().StringVar(&id, "id", "", "backup ID (default: the time); the ID of a failed run resumes it")
	cmd.Flags().StringVar(&rate, "rate-limit", "0", "upload bandwidth per node, bytes per second (e.g. 20MiB; 0: unlimited)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 4, "parts each node uploads at once")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json (the manifest)")
	return cmd
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func backupListCommand() *cobra.Command {
	var (
		bf     bucketFlags
		output string
	)
	cmd := &cobra.Command{Use: "list", Short: "List the complete backups in the bucket", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, _, err := bf.open()
			if err != nil {
				return err
			}
			defer b.Close()
			ms, err := backup.List(cmd.Context(), b)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), ms)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTARTED\tSHARDS\tPARTS\tSIZE\tUPLOADED\tSAMPLES (flushed)")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%d\n", m.ID, time.UnixMilli(m.StartedMs).UTC().Format(time.RFC3339),
					len(m.Shards), m.Totals.Objects, human(m.Totals.Bytes), human(m.Totals.UploadedBytes), m.Totals.Samples)
			}
			return tw.Flush()
		}}
	bf.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func backupVerifyCommand() *cobra.Command {
	var (
		bf          bucketFlags
		id          string
		sample      float64
		concurrency int
	)
	cmd := &cobra.Command{Use: "verify", Short: "Download a backup's parts and check every checksum", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, _, err := bf.open()
			if err != nil {
				return err
			}
			defer b.Close()
			m, err := backup.ReadManifest(cmd.Context(), b, id)
			if err != nil {
				return err
			}
			var (
				mu   sync.Mutex
				last time.Time
			)
			res, err := backup.Verify(cmd.Context(), b, m, backup.VerifyOptions{Fraction: sample, Concurrency: concurrency,
				Progress: func(done, total int) {
					mu.Lock()
					defer mu.Unlock()
					if done < total && time.Since(last) < 2*time.Second {
						return
					}
					last = time.Now()
					fmt.Fprintf(cmd.ErrOrStderr(), "verify %s: %d/%d parts checked\n", m.ID, done, total)
				}})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "backup %s: checked %d parts (%s)\n", m.ID, res.Checked, human(res.Bytes))
			if len(res.Damaged) == 0 {
				return nil
			}
			for _, d := range res.Damaged {
				fmt.Fprintln(out, "DAMAGED", d.String())
			}
			return fmt.Errorf("backup %s: %d damaged objects, first %s", m.ID, len(res.Damaged), res.Damaged[0].Key)
		}}
	bf.add(cmd)
	cmd.Flags().StringVar(&id, "id", "", "backup ID")
	_ = cmd.MarkFlagRequired("id")
	cmd.Flags().Float64Var(&sample, "sample", 1, "fraction of the parts to check, (0, 1]")
	cmd.Flags().IntVar(&concurrency, "concurrency", 8, "parts checked at once")
	return cmd
}

func backupPruneCommand() *cobra.Command {
	var (
		bf                bucketFlags
		keepLast          int
		keepWithin, grace string
		dry               bool
		output            string
	)
	cmd := &cobra.Command{Use: "prune", Short: "Delete old backups and the parts no kept backup references", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var kw, gr time.Duration
			var err error
			if keepWithin != "" {
				if kw, err = config.ParseDuration(keepWithin); err != nil {
					return fmt.Errorf("--keep-within: %w", err)
				}
			}
			if gr, err = config.ParseDuration(grace); err != nil {
				return fmt.Errorf("--grace: %w", err)
			}
			b, _, err := bf.open()
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := backup.Prune(cmd.Context(), b, backup.PruneOptions{KeepLast: keepLast, KeepWithin: kw, Grace: gr, DryRun: dry})
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			verb := "deleted"
			if dry {
				verb = "would delete"
			}
			fmt.Fprintf(out, "kept %d backups %v; %s %d backups %v and %d parts; %d parts kept\n",
				len(res.Kept), res.Kept, verb, len(res.Deleted), res.Deleted, res.ObjectsDeleted, res.ObjectsKept)
			if len(res.Blocked) > 0 {
				fmt.Fprintf(out, "no parts deleted: backups %v are in progress (younger than --grace)\n", res.Blocked)
			}
			return nil
		}}
	bf.add(cmd)
	cmd.Flags().IntVar(&keepLast, "keep-last", 0, "keep the N newest backups")
	cmd.Flags().StringVar(&keepWithin, "keep-within", "", "keep every backup started within this long (e.g. 30d)")
	cmd.Flags().StringVar(&grace, "grace", "6h", "keep unreferenced parts younger than this (a running backup's)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "say what would be deleted, delete nothing")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func backupRestoreCommand() *cobra.Command {
	var (
		nf     nodeFlags
		bf     bucketFlags
		id     string
		output string
	)
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Check a restore into a fresh cluster and wait for it to finish",
		Long: `Restore runs inside the nodes: start every node of a new cluster with

  bootstrap:
    restore:
      bucketConfigFile: /etc/tessera/bucket.yml
      backup: <ID>

and create its placement (any number of nodes, RF, isolation groups and
shard count; with another shard count than the backup's every series is
re-hashed, and each node reads every backup shard that can hold series of
its own). Each node loads the shards the placement gives it from the
bucket, checking every checksum, and marks them AVAILABLE.

This command checks the backup against the cluster's placement, waits until
no shard is INITIALIZING, and reports what each node restored and every
damaged part (what it cost). It exits non-zero when a part was damaged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, _, err := bf.open()
			if err != nil {
				return err
			}
			defer b.Close()
			c, err := nf.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), nf.timeout)
			defer cancel()
			m, err := backup.ReadManifest(ctx, b, id)
			if err != nil {
				return err
			}
			var (
				p  placement.Placement
				st []backup.RestoreState
			)
			for said := false; ; {
				if p, err = backup.FetchPlacement(ctx, c, nf.url); err != nil {
					return err
				}
				if p.NumShards != m.NumShards && !said {
					said = true
					fmt.Fprintf(cmd.ErrOrStderr(), "backup %s has %d shards, the cluster %d: every series is re-hashed, each node reads every backup shard that can hold series of its shards\n",
						m.ID, m.NumShards, p.NumShards)
				}
				st = backup.FetchRestoreStatus(ctx, c, nf.scheme(), p)
				pending := 0
				for _, s := range st {
					pending += s.Pending
				}
				if pending == 0 {
					break
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%d shard copies still INITIALIZING\n", pending)
				select {
				case <-ctx.Done():
					return fmt.Errorf("restore of %s not finished: %w", m.ID, ctx.Err())
				case <-time.After(2 * time.Second):
				}
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), st)
			}
			out := cmd.OutOrStdout()
			var damaged []backup.Damage
			for _, s := range st {
				switch {
				case s.Err != "":
					fmt.Fprintf(out, "%s: restore status unavailable: %s\n", s.Node, s.Err)
				case !s.Enabled:
					fmt.Fprintf(out, "%s: restore not configured (bootstrap.restore)\n", s.Node)
				default:
					r := s.Report
					fmt.Fprintf(out, "%s: backup %s, %d shards, %d parts (%s), %d samples, %d damaged\n",
						s.Node, r.Backup, r.ShardsDone, r.Parts, human(r.Bytes), r.Samples, len(r.Damaged))
					damaged = append(damaged, r.Damaged...)
				}
			}
			for _, d := range damaged {
				fmt.Fprintln(out, "DAMAGED", d.String())
			}
			if len(damaged) > 0 {
				return fmt.Errorf("restore of %s: %d damaged parts (the rest restored), first %s", m.ID, len(damaged), damaged[0].Key)
			}
			return nil
		},
	}
	nf.add(cmd, 0)
	bf.add(cmd)
	cmd.Flags().StringVar(&id, "id", "", "backup ID")
	_ = cmd.MarkFlagRequired("id")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}
