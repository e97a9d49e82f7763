package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tessera-tsdb/tessera/placement"
)

func (o *options) print(w io.Writer, p placement.Placement) error {
	if o.output == "json" {
		b, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return fmt.Errorf("encode placement: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	return printTable(w, o.cluster, p)
}

// printTable writes a summary for people: one header line, then one row per
// instance with its shard counts by state.
func printTable(w io.Writer, cluster string, p placement.Placement) error {
	fmt.Fprintf(w, "cluster %s  version %d  shards %d  rf %d  instances %d\n",
		cluster, p.Version, p.NumShards, p.ReplicaFactor, len(p.Instances))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tGROUP\tZONE\tWEIGHT\tENDPOINT\tINITIALIZING\tAVAILABLE\tLEAVING\t")
	for _, in := range p.Instances {
		c := in.CountByState()
		id := in.ID
		if in.Leaving {
			id += " (leaving)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t\n", id, dash(in.IsolationGroup), dash(in.Zone), in.Weight,
			in.Endpoint, c[placement.Initializing], c[placement.Available], c[placement.Leaving])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "shards moving: %d\n", placement.MovingShards(p))
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
