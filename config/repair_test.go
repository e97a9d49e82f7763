package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRepairDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader(""))
	require.NoError(t, err)
	require.True(t, c.Repair.RepairEnabled())
	require.False(t, c.Repair.CompareOnly)
	require.Equal(t, time.Hour, c.Repair.Every)
	require.Equal(t, int64(8<<20), c.Repair.MaxBytesPerSecond)
	require.Equal(t, time.Minute, c.Repair.SettleMargin)
	require.Equal(t, 256, c.Repair.SeriesPerFetch)
}

func TestRepairParse(t *testing.T) {
	c, err := Parse(strings.NewReader("repair:\n  enabled: false\n  compareOnly: true\n  every: 2s\n  maxBytesPerSecond: 1024\n"))
	require.NoError(t, err)
	require.False(t, c.Repair.RepairEnabled())
	require.True(t, c.Repair.CompareOnly)
	require.Equal(t, 2*time.Second, c.Repair.Every)
	require.Equal(t, int64(1024), c.Repair.MaxBytesPerSecond)
}

func TestRepairErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"repair:\n  every: -1s\n", "repair.every"},
		{"repair:\n  maxBytesPerSecond: -5\n", "repair.maxBytesPerSecond"},
		{"repair:\n  settleMargin: -1s\n", "repair.settleMargin"},
		{"repair:\n  seriesPerFetch: -1\n", "repair.seriesPerFetch"},
		{"repair:\n  bogus: 1\n", "bogus"},
	} {
		_, err := Parse(strings.NewReader(tc.yaml))
		require.Error(t, err, tc.yaml)
		require.Contains(t, err.Error(), tc.want, tc.yaml)
	}
}
