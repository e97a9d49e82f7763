package vfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFaultyShortWriteAndSync(t *testing.T) {
	dir := t.TempDir()
	fs := NewFaulty(OS())
	f, err := fs.Create(filepath.Join(dir, "x"))
	require.NoError(t, err)
	defer f.Close()

	_, err = f.Write([]byte("hello"))
	require.NoError(t, err)

	fs.Set(func(op Op, _ string, n int) (bool, int) { return op == OpWrite, 2 })
	n, err := f.Write([]byte("world"))
	require.ErrorIs(t, err, ErrInjected)
	require.Equal(t, 2, n)

	fs.Set(func(op Op, _ string, _ int) (bool, int) { return op == OpSync, 0 })
	require.ErrorIs(t, f.Sync(), ErrInjected)

	fs.Set(nil)
	require.NoError(t, f.Sync())
	b, err := os.ReadFile(filepath.Join(dir, "x"))
	require.NoError(t, err)
	require.Equal(t, "hellowo", string(b))
}
