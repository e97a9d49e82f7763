package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1048576": 1 << 20, "20MiB": 20 << 20, "512KiB": 512 << 10, "5MB": 5e6, "1GiB": 1 << 30, "100B": 100} {
		got, err := parseBytes(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "fast", "-1", "10XB"} {
		_, err := parseBytes(bad)
		require.Error(t, err, bad)
	}
}
