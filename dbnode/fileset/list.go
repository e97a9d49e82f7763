package fileset

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// List returns the complete filesets of a shard (those with a valid
// checkpoint), sorted by BlockStart then Volume. A missing shard directory
// is an empty list. Only checkpoints are read; Open checks the rest.
func List(fsys vfs.FS, root, namespace string, shard uint32) ([]ID, error) {
	ids, err := listComplete(fsys, root, namespace, shard)
	if err != nil {
		return nil, fmt.Errorf("list filesets %s/%d: %w", namespace, shard, err)
	}
	return ids, nil
}

func listComplete(fsys vfs.FS, root, namespace string, shard uint32) ([]ID, error) {
	groups, err := scan(fsys, root, namespace, shard)
	if err != nil {
		return nil, err
	}
	var ids []ID
	for _, g := range groups {
		if !g.kinds[kindCheckpoint] {
			continue
		}
		ok, err := complete(fsys, root, g.id)
		if err != nil {
			return nil, err
		}
		if ok {
			ids = append(ids, g.id)
		}
	}
	return ids, nil
}

// complete reports whether id has a valid checkpoint. A corrupt or vanished
// checkpoint means incomplete; other read errors are returned.
func complete(fsys vfs.FS, root string, id ID) (bool, error) {
	_, err := readCheckpoint(fsys, filePath(root, id, kindCheckpoint), id)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrCorrupt), errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// group is the fileset files found on disk for one (blockStart, volume).
type group struct {
	id    ID
	kinds map[fileKind]bool
}

// scan groups the fileset files of a shard directory by ID, sorted by
// BlockStart then Volume. Files that are not fileset files are ignored.
func scan(fsys vfs.FS, root, namespace string, shard uint32) ([]group, error) {
	if err := validateNamespace(namespace); err != nil {
		return nil, err
	}
	entries, err := fsys.ReadDir(ShardDir(root, namespace, shard))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byID := map[ID]*group{}
	var groups []*group
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		bs, vol, kind, ok := parseFileName(e.Name())
		if !ok {
			continue
		}
		id := ID{Namespace: namespace, Shard: shard, BlockStart: bs, Volume: vol}
		g := byID[id]
		if g == nil {
			g = &group{id: id, kinds: map[fileKind]bool{}}
			byID[id] = g
			groups = append(groups, g)
		}
		g.kinds[kind] = true
	}
	out := make([]group, len(groups))
	for i, g := range groups {
		out[i] = *g
	}
	slices.SortFunc(out, func(a, b group) int { return compareIDs(a.id, b.id) })
	return out, nil
}

func compareIDs(a, b ID) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Shard, b.Shard),
		cmp.Compare(a.BlockStart, b.BlockStart),
		cmp.Compare(a.Volume, b.Volume),
	)
}

// Shards lists the shard numbers that have a directory under
// root/namespace, ascending. A missing namespace directory is an empty list.
func Shards(fsys vfs.FS, root, namespace string) ([]uint32, error) {
	if err := validateNamespace(namespace); err != nil {
		return nil, fmt.Errorf("list shards of %q: %w", namespace, err)
	}
	entries, err := fsys.ReadDir(NamespaceDir(root, namespace))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list shards of %q: %w", namespace, err)
	}
	var shards []uint32
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || strconv.FormatUint(n, 10) != e.Name() {
			continue
		}
		shards = append(shards, uint32(n))
	}
	slices.Sort(shards)
	return shards, nil
}

// Latest keeps, for every block in ids, only the highest volume: the
// filesets that hold a block's current data. ids need not be sorted.
func Latest(ids []ID) []ID {
	latest, _ := splitVolumes(ids)
	return latest
}

// Obsolete returns the filesets of ids superseded by a higher volume of the
// same block; they may be removed once the higher volume is complete.
func Obsolete(ids []ID) []ID {
	_, obsolete := splitVolumes(ids)
	return obsolete
}

func splitVolumes(ids []ID) (latest, obsolete []ID) {
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, compareIDs)
	for i, id := range sorted {
		if i+1 < len(sorted) {
			next := sorted[i+1]
			if next.Namespace == id.Namespace && next.Shard == id.Shard && next.BlockStart == id.BlockStart {
				obsolete = append(obsolete, id)
				continue
			}
		}
		latest = append(latest, id)
	}
	return latest, obsolete
}
