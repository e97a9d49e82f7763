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
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a node through Prometheus remote write and optionally read every sample back",
		Long: `Load a node through Prometheus remote write and optionally read every sample back.

Series i is named <metric>_(i % 4): with the default --metric, tessera_bench_0
holds counters (rate() works), tessera_bench_1 gauges, tessera_bench_2 noisy
floats and tessera_bench_3 large integers. Every series has the labels
job="bench", instance="host-(i % 50):9100", group (i / 100) and series (i).
The run prints how many series each name got.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	f.StringVar(&o.URL, "url", "http://127.0.0.1:7201", "node base URL")
	f.IntVar(&o.Series, "series", 10000, "number of series")
	f.IntVar(&o.Samples, "samples", 360, "samples per series")
	f.DurationVar(&o.Interval, "interval", time.Second, "interval between samples of a series")
	f.IntVar(&o.Batch, "batch", 5000, "samples per remote write request")
	f.IntVar(&o.Concurrency, "concurrency", 4, "concurrent writers")
	f.BoolVar(&verify, "verify", false, "after writing, read every series back through remote read and compare bit for bit")
	f.BoolVar(&verifyOnly, "verify-only", false, "only verify data written by an earlier run with the same --start")
	f.Int64Var(&o.Start, "start", 0, "timestamp (ms) of the first sample; default now - samples*interval")
	securityFlags(f, &o.Security)
	f.StringVar(&o.Metric, "metric", "tessera_bench", "metric name prefix: the series are spread over PREFIX_0 (counters), PREFIX_1 (gauges), PREFIX_2 (noisy floats) and PREFIX_3 (large integers)")
	f.IntVar(&o.Protocol, "protocol", 1, "remote write version: 1 (prometheus.WriteRequest) or 2 (io.prometheus.write.v2.Request, with metadata on every series)")
	f.Int64Var(&o.PregenBytes, "pregen-bytes", bench.DefaultPregenBytes, "build every request before the run when they fit in this many bytes (negative: build them during the run)")
	return cmd
}
