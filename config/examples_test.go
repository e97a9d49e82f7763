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

// The secure compose variant's configs (mounted by
// docker-compose.secure.yml, not baked into the image) must load too.
func TestSecureComposeConfigsLoad(t *testing.T) {
	files, err := filepath.Glob("../deploy/compose/secure/*.yml")
	require.NoError(t, err)
	require.Len(t, files, 3)
	for _, f := range files {
		c, err := Load(f)
		require.NoError(t, err, f)
		require.True(t, c.RPC.TLS.Enabled() && c.HTTP.Auth.Enabled() && c.Etcd.TLS.Enabled(), f)
	}
}
