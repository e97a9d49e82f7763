package config

import (
	"fmt"
	"strings"
	"time"
)

// validateRollups checks the rollupOf/resolution pairs of the namespaces:
// each rollup names a known source, no chain loops, a rollup keeps its
// data at least as long as its source, and its windows tile both its own
// blocks and its source's (so a sealed source block rolls up into whole
// windows) and nest in the source's windows when the source is itself a
// rollup (so a 1h window is exactly twelve 5m ones).
func validateRollups(nss []Namespace, bad func(field, format string, args ...any)) {
	byName := make(map[string]int, len(nss))
	for i, n := range nss {
		if _, dup := byName[n.Name]; !dup {
			byName[n.Name] = i
		}
	}
	for i, n := range nss {
		f := func(name string) string { return fmt.Sprintf("namespaces[%d].%s", i, name) }
		if !n.IsRollup() {
			if n.Resolution != 0 {
				bad(f("resolution"), "%v is set but rollupOf is not: only a rollup namespace has a resolution", n.Resolution)
			}
			continue
		}
		if i == 0 {
			// The first namespace takes remote writes (httpapi's
			// Namespace); a rollup is only ever written by its source.
			bad(f("rollupOf"), "the first namespace receives writes and cannot be a rollup; list the raw namespace first")
		}
		if n.Resolution < time.Second || n.Resolution%time.Second != 0 {
			bad(f("resolution"), "a rollup needs a whole number of seconds >= 1s, got %v", n.Resolution)
		} else if n.BlockSize > 0 && n.BlockSize%n.Resolution != 0 {
			bad(f("resolution"), "%v does not divide blockSize %v", n.Resolution, n.BlockSize)
		}
		si, ok := byName[n.RollupOf]
		if !ok {
			bad(f("rollupOf"), "%q is not a namespace defined here", n.RollupOf)
			continue
		}
		if si == i {
			bad(f("rollupOf"), "%q is a rollup of itself", n.RollupOf)
			continue
		}
		if cycle := rollupCycle(nss, byName, i); cycle != nil {
			bad(f("rollupOf"), "rollup chain loops: %s", strings.Join(cycle, " -> "))
			continue
		}
		src := nss[si]
		if n.Retention < src.Retention {
			bad(f("retention"), "%v is shorter than the retention %v of its source %q", n.Retention, src.Retention, src.Name)
		}
		if n.Resolution >= time.Second && src.BlockSize > 0 && src.BlockSize%n.Resolution != 0 {
			bad(f("resolution"), "%v does not divide blockSize %v of its source %q", n.Resolution, src.BlockSize, src.Name)
		}
		if src.IsRollup() && src.Resolution > 0 {
			switch {
			case n.Resolution <= src.Resolution:
				bad(f("resolution"), "%v is not coarser than the resolution %v of its source %q", n.Resolution, src.Resolution, src.Name)
			case n.Resolution%src.Resolution != 0:
				bad(f("resolution"), "%v is not a multiple of the resolution %v of its source %q, so its windows would not be whole source windows", n.Resolution, src.Resolution, src.Name)
			}
		}
	}
}

// rollupCycle follows rollupOf from namespace i and returns the names
// along the loop when the chain comes back to i, nil when it ends at a raw
// namespace, an unknown name, or a loop that does not pass through i (that
// loop is reported at its own members).
func rollupCycle(nss []Namespace, byName map[string]int, i int) []string {
	path := []string{nss[i].Name}
	seen := map[int]bool{i: true}
	for j := i; nss[j].IsRollup(); {
		next, ok := byName[nss[j].RollupOf]
		if !ok {
			return nil
		}
		path = append(path, nss[next].Name)
		if next == i {
			return path
		}
		if seen[next] {
			return nil
		}
		seen[next] = true
		j = next
	}
	return nil
}
