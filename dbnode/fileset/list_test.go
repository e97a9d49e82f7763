package fileset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

func TestListSortsBlocksAndVolumes(t *testing.T) {
	root := t.TempDir()
	const h2 = 2 * 3600 * 1000
	written := []ID{
		testID(3*h2, 0), testID(h2, 2), testID(h2, 10), testID(-h2, 0), testID(h2, 0), testID(3*h2, 1), testID(h2, 1),
	}
	for _, id := range written {
		writeTest(t, vfs.OS(), root, id, genSeries(3, uint64(id.Volume), 50))
	}
	ids, err := List(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Equal(t, []ID{
		testID(-h2, 0), testID(h2, 0), testID(h2, 1), testID(h2, 2), testID(h2, 10), testID(3*h2, 0), testID(3*h2, 1),
	}, ids)
	require.Equal(t, []ID{testID(-h2, 0), testID(h2, 10), testID(3*h2, 1)}, Latest(ids))
	require.Equal(t, []ID{testID(h2, 0), testID(h2, 1), testID(h2, 2), testID(3*h2, 0)}, Obsolete(ids))

	// Other shards and namespaces are separate.
	ids, err = List(vfs.OS(), root, "default", 8)
	require.NoError(t, err)
	require.Empty(t, ids)
	ids, err = List(vfs.OS(), root, "other", 7)
	require.NoError(t, err)
	require.Empty(t, ids)
}

func TestListIgnoresIncompleteFilesets(t *testing.T) {
	root := t.TempDir()
	good := testID(0, 0)
	noCheckpoint := testID(1000, 0)
	corrupt := testID(2000, 0)
	torn := testID(3000, 0)
	misplaced := testID(4000, 0)
	for _, id := range []ID{good, noCheckpoint, corrupt, torn, misplaced} {
		writeTest(t, vfs.OS(), root, id, genSeries(10, uint64(id.BlockStart), 50))
	}
	require.NoError(t, os.Remove(filePath(root, noCheckpoint, kindCheckpoint)))
	flipByte(t, filePath(root, corrupt, kindCheckpoint), 10)
	require.NoError(t, os.Truncate(filePath(root, torn, kindCheckpoint), 7))
	// A valid checkpoint of another fileset renamed into place.
	require.NoError(t, os.Rename(filePath(root, good, kindCheckpoint), filePath(root, misplaced, kindCheckpoint)))
	writeTest(t, vfs.OS(), root, good, genSeries(10, 0, 50)) // good was left incomplete by the rename: rewrite
	// Stray files that are not filesets are left alone.
	stray := filepath.Join(ShardDir(root, "default", 7), "notes.txt")
	require.NoError(t, os.WriteFile(stray, []byte("x"), 0o644))

	ids, err := List(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Equal(t, []ID{good}, ids)

	for _, id := range []ID{noCheckpoint, corrupt, torn, misplaced} {
		_, err := Open(vfs.OS(), root, id)
		require.Error(t, err, "%v", id)
	}

	// Without Remove's pending marker, none of the four is an
	// interrupted removal: each is damage, moved aside, never deleted.
	n, damaged, err := ResolveIncomplete(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, damaged, 4)
	for _, d := range damaged {
		require.ErrorIs(t, d.Err, ErrCorrupt, "%v", d.ID)
	}
	require.Contains(t, damaged[0].Err.Error(), "checkpoint missing")
	entries, err := os.ReadDir(ShardDir(root, "default", 7))
	require.NoError(t, err)
	var names []string
	aside := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), CorruptSuffix) {
			aside++
			continue
		}
		names = append(names, e.Name())
	}
	require.Equal(t, 4*5-1, aside, "every file but the deleted checkpoint kept")
	require.ElementsMatch(t, []string{
		"notes.txt",
		"fileset-0-0-info.db", "fileset-0-0-index.db", "fileset-0-0-data.db",
		"fileset-0-0-digest.db", "fileset-0-0-checkpoint.db",
	}, names)
	r := openTest(t, vfs.OS(), root, good)
	require.NoError(t, r.Verify())

	n, damaged, err = ResolveIncomplete(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, damaged)
}

func TestShards(t *testing.T) {
	root := t.TempDir()
	shards, err := Shards(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Empty(t, shards)
	for _, s := range []uint32{4095, 0, 17} {
		writeTest(t, vfs.OS(), root, ID{Namespace: "default", Shard: s}, genSeries(1, 1, 10))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "default", "not-a-shard"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "default", "007"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "default", "12"), nil, 0o644))
	shards, err = Shards(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Equal(t, []uint32{0, 17, 4095}, shards)
}

func TestRemove(t *testing.T) {
	root := t.TempDir()
	keep, gone := testID(0, 0), testID(0, 1)
	writeTest(t, vfs.OS(), root, keep, genSeries(10, 1, 50))
	writeTest(t, vfs.OS(), root, gone, genSeries(10, 2, 50))
	require.NoError(t, Remove(vfs.OS(), root, gone))
	for _, k := range kinds {
		_, err := os.Stat(filePath(root, gone, k))
		require.ErrorIs(t, err, os.ErrNotExist, k)
	}
	ids, err := List(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Equal(t, []ID{keep}, ids)
	require.NoError(t, Remove(vfs.OS(), root, gone), "removing twice is fine")
	require.NoError(t, Remove(vfs.OS(), root, testID(0, 0).withShard(99)), "missing shard dir is fine")
}

func TestRemoveFailingMidwayLeavesIncompleteFileset(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	writeTest(t, vfs.OS(), root, id, genSeries(10, 1, 50))
	faulty := vfs.NewFaulty(vfs.OS())
	faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
		return op == vfs.OpRemove && filepath.Base(path) == fileName(id, kindData), 0
	})
	err := Remove(faulty, root, id)
	require.ErrorIs(t, err, vfs.ErrInjected)
	require.Contains(t, err.Error(), id.String())
	ids, err := List(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Empty(t, ids, "checkpoint went first")
	n, damaged, err := ResolveIncomplete(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, damaged, "an interrupted removal (its pending marker) is not damage")
	entries, err := os.ReadDir(ShardDir(root, "default", 7))
	require.NoError(t, err)
	require.Empty(t, entries)
}

func (id ID) withShard(s uint32) ID { id.Shard = s; return id }
