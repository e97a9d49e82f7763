package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/tessera-tsdb/tessera/bench"
)

func benchCommand() *cobra.Command {
	var o bench.Options
	var verify, verifyOnly bool
	var workload string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a node through Prometheus remote write and optionally read every sample back",
		Long: `Load a node through Prometheus remote write and optionally read every sample back.

Series i is named <metric>_(i % 4), counters with _total: with the default --metric, tessera_bench_0_total
holds counters (rate() works), tessera_bench_1 gauges, tessera_bench_2 noisy
floats and tessera_bench_3 large integers. Every series has the labels
job="bench", instance="host-(i % 50):9100", group (i / 100) and series (i).
The run prints how many series each name got.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch workload {
			case bench.WorkloadNodeExporter:
				return runNodeExporter(cmd, o, verify || verifyOnly)
			case bench.WorkloadSynthetic:
			default:
				return fmt.Errorf("bench: unknown --workload %q: %s or %s", workload, bench.WorkloadSynthetic, bench.WorkloadNodeExporter)
			}
			if cmd.Flags().Changed("hosts") {
				return fmt.Errorf("bench: --hosts applies to --workload %s only", bench.WorkloadNodeExporter)
			}
			if err := o.Validate(); err != nil {
				return err
			}
			// Secrets from the environment, so they stay out of `ps`.
			o.Security.CredentialsFromEnv()
			if o.Start == 0 {
				// End the data a little before now so nothing lands past
				// bufferFuture; older samples are inside retention.
				o.Start = time.Now().Add(-time.Duration(o.Samples)*o.Interval - 10*time.Second).UnixMilli()
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "bench: %d series x %d samples at %v, batch %d, concurrency %d, start %d, remote write %d.0, target %s\n",
				o.Series, o.Samples, o.Interval, o.Batch, o.Concurrency, o.Start, max(o.Protocol, 1), o.URL)
			fmt.Fprintln(out, bench.Describe(o))
			if !verifyOnly {
				if _, err := bench.Write(cmd.Context(), o, out); err != nil {
					return err
				}
			}
			if verify || verifyOnly {
				return bench.Verify(cmd.Context(), o, out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "http://127.0.0.1:7201", "node base URL, or a whole remote write URL ending in /write (VictoriaMetrics: http://host:8428/api/v1/write)")
	f.StringVar(&workload, "workload", bench.WorkloadSynthetic, "what to write: "+bench.WorkloadSynthetic+
		" (--series x --samples, below) or "+bench.WorkloadNodeExporter+
		" (--hosts node_exporter hosts x 30 min at 10 s, ~125 series a host, the data 'tessera bench queries' runs on)")
	f.IntVar(&o.Hosts, "hosts", 800, "node_exporter hosts of --workload "+bench.WorkloadNodeExporter+" (800: ~100,000 series)")
	f.IntVar(&o.Series, "series", 10000, "number of series")
	f.IntVar(&o.Samples, "samples", 360, "samples per series")
	f.DurationVar(&o.Interval, "interval", time.Second, "interval between samples of a series")
	f.IntVar(&o.Batch, "batch", 5000, "samples per remote write request")
	f.IntVar(&o.Concurrency, "concurrency", 4, "concurrent writers")
	f.BoolVar(&verify, "verify", false, "after writing, read every series back through remote read and compare bit for bit")
	f.BoolVar(&verifyOnly, "verify-only", false, "only verify data written by an earlier run with the same --start")
	f.Int64Var(&o.Start, "start", 0, "timestamp (ms) of the first sample; default now - samples*interval")
	securityFlags(f, &o.Security)
	f.StringVar(&o.Metric, "metric", "tessera_bench", "metric name prefix: the series are spread over PREFIX_0_total (counters), PREFIX_1 (gauges), PREFIX_2 (noisy floats) and PREFIX_3 (large integers)")
	f.IntVar(&o.Protocol, "protocol", 1, "remote write version: 1 (prometheus.WriteRequest) or 2 (io.prometheus.write.v2.Request, with metadata on every series)")
	f.Int64Var(&o.PregenBytes, "pregen-bytes", bench.DefaultPregenBytes, "build every request before the run when they fit in this many bytes (negative: build them during the run)")
	cmd.AddCommand(benchQueriesCommand())
	return cmd
}

// runNodeExporter writes the node_exporter workload. The synthetic
// workload's shape flags do not apply to it, and it cannot be verified
// (it is checked by comparing query answers instead): saying so beats
// ignoring them.
func runNodeExporter(cmd *cobra.Command, o bench.Options, verify bool) error {
	for _, name := range []string{"series", "samples", "interval", "metric", "pregen-bytes"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("bench: --%s does not apply to --workload %s", name, bench.WorkloadNodeExporter)
		}
	}
	if verify {
		return fmt.Errorf("bench: --verify does not apply to --workload %s: compare query answers with `tessera bench queries --compare`", bench.WorkloadNodeExporter)
	}
	if err := o.ValidateNodeExporter(); err != nil {
		return err
	}
	o.Security.CredentialsFromEnv()
	if o.Start == 0 {
		o.Start = bench.NodeExporterStart(time.Now())
	}
	out := cmd.OutOrStdout()
	fmt.Fprintln(out, bench.DescribeNodeExporter(o))
	_, err := bench.WriteNodeExporter(cmd.Context(), o, out)
	return err
}

func benchQueriesCommand() *cobra.Command {
	var o bench.QueryOptions
	cmd := &cobra.Command{
		Use:   "queries",
		Short: "Time the node_exporter workload's Grafana-style range queries against a Prometheus HTTP API",
		Long: `Time the node_exporter workload's Grafana-style range queries against a Prometheus HTTP API.

Load the data first with ` + "`tessera bench --workload nodeexporter`" + ` (into Tessera, or
VictoriaMetrics through --url http://host:8428/api/v1/write) and pass the start it
printed. Each of the 11 queries runs as GET /api/v1/query_range over the loaded
span at a 15 s step with Accept-Encoding: gzip, as Grafana sends it; all queries
once per round, --rounds rounds, and the table gives each query's best wall time
(request sent to last byte read), the series and points it returned, and the
geometric mean of the best times. With --compare URL the answers of the two APIs
are compared point by point (values within 1e-9 relative).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Security.CredentialsFromEnv()
			_, err := bench.RunQueries(cmd.Context(), o, cmd.OutOrStdout())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "http://127.0.0.1:7201", "Prometheus API base URL (a Tessera node, VictoriaMetrics http://host:8428, Prometheus)")
	f.Int64Var(&o.Start, "start", 0, "start (ms) of the loaded node_exporter data, as 'tessera bench --workload nodeexporter' printed it (required)")
	f.IntVar(&o.Rounds, "rounds", 3, "runs of each query; the best is reported")
	f.StringVar(&o.Compare, "compare", "", "a second Prometheus API base URL whose answers are compared with --url's")
	f.StringSliceVar(&o.Only, "only", nil, "run only these queries (names as in the table)")
	securityFlags(f, &o.Security)
	return cmd
}
