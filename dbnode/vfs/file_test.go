package vfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteFileAtomicKeepsOldFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "sub", "state.json")
	fs := NewFaulty(OS())
	require.NoError(t, WriteFileAtomic(fs, name, []byte("v1")))
	b, err := ReadFile(fs, name)
	require.NoError(t, err)
	require.Equal(t, "v1", string(b))

	for _, op := range []Op{OpWrite, OpSync, OpRename} {
		fs.Set(func(o Op, _ string, _ int) (bool, int) { return o == op, 0 })
		err := WriteFileAtomic(fs, name, []byte("v2-longer"))
		require.ErrorIs(t, err, ErrInjected, op.String())
		fs.Set(nil)
		b, err := ReadFile(fs, name)
		require.NoError(t, err)
		require.Equal(t, "v1", string(b), "a failed %s must leave the old file", op)
		_, err = os.Stat(name + ".tmp")
		require.True(t, os.IsNotExist(err), "temporary file left after failed %s", op)
	}
	require.NoError(t, WriteFileAtomic(fs, name, []byte("v3")))
	b, err = ReadFile(fs, name)
	require.NoError(t, err)
	require.Equal(t, "v3", string(b))
}
