package config

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The shipped example configs must stay valid as the schema changes.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("examples/*/*.yml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		_, err := Load(f)
		require.NoError(t, err, f)
	}
}
