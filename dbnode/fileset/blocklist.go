package fileset

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// ListBlocks returns the complete version 2 volumes of a namespace (those
// with a valid checkpoint), sorted by BlockStart then Volume. A missing
// namespace directory is an empty list. Only checkpoints are read.
func ListBlocks(fsys vfs.FS, root, namespace string) ([]BlockID, error) {
	groups, err := scanBlocks(fsys, root, namespace)
	if err != nil {
		return nil, fmt.Errorf("list volumes of %s: %w", namespace, err)
	}
	var ids []BlockID
	for _, g := range groups {
		if !g.kinds[kindCheckpoint] {
			continue
		}
		ok, err := blockComplete(fsys, root, g.id)
		if err != nil {
			return nil, fmt.Errorf("list volumes of %s: %w", namespace, err)
		}
		if ok {
			ids = append(ids, g.id)
		}
	}
	return ids, nil
}

func blockComplete(fsys vfs.FS, root string, id BlockID) (bool, error) {
	_, err := readBlockCheckpoint(fsys, blockFilePath(root, id, kindCheckpoint), id)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrCorrupt), errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

type blockGroup struct {
	id    BlockID
	kinds map[fileKind]bool
}

// scanBlocks groups the volume files of a namespace directory by ID.
// Names that are not volume files (shard directories, foreign files, the
// info and digest kinds that only version 1 has) are ignored.
func scanBlocks(fsys vfs.FS, root, namespace string) ([]blockGroup, error) {
	if err := validateNamespace(namespace); err != nil {
		return nil, err
	}
	entries, err := fsys.ReadDir(NamespaceDir(root, namespace))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byID := map[BlockID]*blockGroup{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		bs, vol, kind, ok := parseFileName(e.Name())
		if !ok || !slices.Contains(blockKinds, kind) && kind != kindPending {
			continue
		}
		id := BlockID{Namespace: namespace, BlockStart: bs, Volume: vol}
		g := byID[id]
		if g == nil {
			g = &blockGroup{id: id, kinds: map[fileKind]bool{}}
			byID[id] = g
		}
		g.kinds[kind] = true
	}
	out := make([]blockGroup, 0, len(byID))
	for _, g := range byID {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b blockGroup) int { return compareBlockIDs(a.id, b.id) })
	return out, nil
}

func compareBlockIDs(a, b BlockID) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.BlockStart, b.BlockStart),
		cmp.Compare(a.Volume, b.Volume),
	)
}

// RemoveBlock deletes the files of a volume: it marks the volume pending
// (kindPending), deletes the checkpoint and makes both durable before the
// other files go, so a crash midway leaves an incomplete volume that the
// next start recognises as an interrupted removal. A volume that does not
// exist is not an error; readers already open keep working until closed
// (on POSIX file systems).
func RemoveBlock(fsys vfs.FS, root string, id BlockID) error {
	if err := id.validate(); err != nil {
		return fmt.Errorf("remove volume %v: %w", id, err)
	}
	if err := removeBlockFiles(fsys, root, id); err != nil {
		return fmt.Errorf("remove volume %v: %w", id, err)
	}
	return nil
}

func removeBlockFiles(fsys vfs.FS, root string, id BlockID) error {
	dir := NamespaceDir(root, id.Namespace)
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := markPending(fsys, root, id); err != nil {
		return err
	}
	if err := removeIfExists(fsys, blockFilePath(root, id, kindCheckpoint)); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	for _, k := range blockKinds {
		if k == kindCheckpoint {
			continue
		}
		if err := removeIfExists(fsys, blockFilePath(root, id, k)); err != nil {
			return err
		}
	}
	// The marker goes last: until then a crash leaves it with the files.
	if err := removeIfExists(fsys, blockFilePath(root, id, kindPending)); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// markPending creates the volume's pending marker (empty; made durable by
// the caller's next directory fsync, which precedes any state that relies
// on it: see kindPending).
func markPending(fsys vfs.FS, root string, id BlockID) error {
	if err := createEmpty(fsys, blockFilePath(root, id, kindPending)); err != nil {
		return fmt.Errorf("create pending marker: %w", err)
	}
	return nil
}

func createEmpty(fsys vfs.FS, path string) error {
	f, err := fsys.Create(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// DamagedBlock is a volume found without a valid checkpoint and without
// the pending marker of an interrupted flush or removal: its files were
// moved aside (Moved) and Err says what is wrong.
type DamagedBlock struct {
	ID    BlockID
	Err   error
	Moved []string
}

// ResolveIncompleteBlocks sorts out every version 2 volume of a namespace
// without a valid checkpoint, by the evidence the writer and RemoveBlock
// leave (kindPending):
//
//   - with a pending marker it is an interrupted flush (its data is still
//     in the commit log or in the volumes it was to replace, which are
//     retired only after it is complete) or an interrupted removal (its
//     data is no longer served): its files are deleted, and counted in
//     removed;
//   - without one it is damage (a deleted or damaged checkpoint): its
//     files are moved aside as MoveBlockAside does, never deleted, and
//     returned in damaged.
//
// A marker beside a valid checkpoint (a crash after the checkpoint was
// durable but before the marker's removal was) is removed. It must not run
// concurrently with a BlockWriter or RemoveBlock of the namespace; the
// storage engine calls it at startup, before flushing.
func ResolveIncompleteBlocks(fsys vfs.FS, root, namespace string) (removed int, damaged []DamagedBlock, err error) {
	groups, err := scanBlocks(fsys, root, namespace)
	if err != nil {
		return 0, nil, fmt.Errorf("resolve incomplete volumes of %s: %w", namespace, err)
	}
	for _, g := range groups {
		cpErr := fs.ErrNotExist
		if g.kinds[kindCheckpoint] {
			cpErr = nil
			_, err := readBlockCheckpoint(fsys, blockFilePath(root, g.id, kindCheckpoint), g.id)
			switch {
			case err == nil:
			case errors.Is(err, ErrCorrupt), errors.Is(err, fs.ErrNotExist):
				cpErr = err
			default:
				return removed, damaged, fmt.Errorf("resolve incomplete volumes of %s: %w", namespace, err)
			}
		}
		switch {
		case cpErr == nil && g.kinds[kindPending]:
			if err := removeIfExists(fsys, blockFilePath(root, g.id, kindPending)); err != nil {
				return removed, damaged, fmt.Errorf("remove stale pending marker of %v: %w", g.id, err)
			}
		case cpErr == nil:
		case g.kinds[kindPending]:
			if err := removeBlockFiles(fsys, root, g.id); err != nil {
				return removed, damaged, fmt.Errorf("remove incomplete volume %v: %w", g.id, err)
			}
			if g.kinds[kindData] || g.kinds[kindIndex] || g.kinds[kindCheckpoint] {
				removed++
			}
		default:
			if errors.Is(cpErr, fs.ErrNotExist) {
				cpErr = fmt.Errorf("%s: %w: checkpoint missing, and no flush or removal of the volume was in progress",
					blockFilePath(root, g.id, kindCheckpoint), ErrCorrupt)
			}
			moved, err := MoveBlockAside(fsys, root, g.id)
			if err != nil {
				return removed, damaged, fmt.Errorf("damaged volume %v (%v): %w", g.id, cpErr, err)
			}
			damaged = append(damaged, DamagedBlock{ID: g.id, Err: cpErr, Moved: moved})
		}
	}
	return removed, damaged, nil
}

// MoveBlockAside renames the files of a volume that failed its checks to
// <name>.corrupt (checkpoint last), keeping them for inspection and
// freeing the name. It returns the paths the files now have.
func MoveBlockAside(fsys vfs.FS, root string, id BlockID) ([]string, error) {
	if err := id.validate(); err != nil {
		return nil, fmt.Errorf("move volume %v aside: %w", id, err)
	}
	var moved []string
	for _, k := range blockKinds { // checkpoint last
		p := blockFilePath(root, id, k)
		if _, err := fsys.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := fsys.Rename(p, p+CorruptSuffix); err != nil {
			return moved, fmt.Errorf("move volume %v aside: %w", id, err)
		}
		moved = append(moved, p+CorruptSuffix)
	}
	if err := fsys.SyncDir(NamespaceDir(root, id.Namespace)); err != nil {
		return moved, fmt.Errorf("move volume %v aside: sync directory: %w", id, err)
	}
	return moved, nil
}
