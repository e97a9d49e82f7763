package cli

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/tessera-tsdb/tessera/placement"
)

// instanceFields are the keys --instance accepts, in the order help lists
// them.
var instanceFields = []string{"id", "group", "zone", "weight", "endpoint", "http"}

func parseInstances(specs []string) ([]placement.Instance, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("--instance: give at least one instance")
	}
	out := make([]placement.Instance, 0, len(specs))
	for _, spec := range specs {
		in, err := parseInstance(spec)
		if err != nil {
			return nil, fmt.Errorf("--instance %q: %w", spec, err)
		}
		out = append(out, in)
	}
	return out, nil
}

// parseInstance reads id=...,group=...,zone=...,weight=...,endpoint=host:port
// [,http=host:port]. id, group and endpoint are required; weight defaults
// to 1. Errors name the offending field.
func parseInstance(spec string) (placement.Instance, error) {
	in := placement.Instance{Weight: 1}
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		key, value, ok := strings.Cut(part, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok {
			return in, fmt.Errorf("field %q is not key=value", part)
		}
		if seen[key] {
			return in, fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "id":
			in.ID = value
		case "group":
			in.IsolationGroup = value
		case "zone":
			in.Zone = value
		case "weight":
			w, err := strconv.ParseUint(value, 10, 32)
			if err != nil || w == 0 {
				return in, fmt.Errorf("field weight: %q is not a positive integer", value)
			}
			in.Weight = uint32(w)
		case "endpoint":
			if err := checkHostPort(value); err != nil {
				return in, fmt.Errorf("field endpoint: %w", err)
			}
			in.Endpoint = value
		case "http":
			if err := checkHostPort(value); err != nil {
				return in, fmt.Errorf("field http: %w", err)
			}
			in.HTTPEndpoint = value
		default:
			return in, fmt.Errorf("unknown field %q (want %s)", key, strings.Join(instanceFields, ", "))
		}
	}
	for _, req := range []struct{ name, value string }{{"id", in.ID}, {"group", in.IsolationGroup}, {"endpoint", in.Endpoint}} {
		if req.value == "" {
			return in, fmt.Errorf("missing field %s", req.name)
		}
	}
	return in, nil
}

func checkHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not host:port", v)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%q has an invalid port", v)
	}
	return nil
}
