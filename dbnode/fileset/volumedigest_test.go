package fileset

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// TestVolumeDigest: the digest is the checkpoint's (read again, the
// same), two volumes of other content differ, and a volume without a
// checkpoint is an error, not a digest.
func TestVolumeDigest(t *testing.T) {
	root := t.TempDir()
	a, b := testBlockID(0), testBlockID(1)
	require.NoError(t, WriteBlock(vfs.OS(), root, a, testBlockSize, genShards([]uint32{0, 3}, 50, 100)))
	require.NoError(t, WriteBlock(vfs.OS(), root, b, testBlockSize, genShards([]uint32{0, 4}, 50, 100)))
	da, err := ReadVolumeDigest(vfs.OS(), root, a)
	require.NoError(t, err)
	again, err := ReadVolumeDigest(vfs.OS(), root, a)
	require.NoError(t, err)
	require.Equal(t, da, again)
	require.Equal(t, uint32(2), da.Shards)
	require.Equal(t, openBlockTest(t, root, a).cp.data.size, da.DataSize)
	db, err := ReadVolumeDigest(vfs.OS(), root, b)
	require.NoError(t, err)
	require.NotEqual(t, da.String(), db.String())
	_, err = ReadVolumeDigest(vfs.OS(), root, testBlockID(2))
	require.Error(t, err)
}
