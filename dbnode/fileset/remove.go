package fileset

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Remove deletes every file of a fileset. It marks the fileset pending
// (see kindPending), and the checkpoint goes first, both made durable
// before the other files are touched, so a crash midway leaves an
// incomplete fileset that List ignores and the next start recognises as an
// interrupted removal. Removing a
// fileset that does not exist is not an error. Readers already open on it
// keep working until closed (on POSIX file systems).
func Remove(fsys vfs.FS, root string, id ID) error {
	if err := id.validate(); err != nil {
		return fmt.Errorf("remove fileset %v: %w", id, err)
	}
	if err := removeFiles(fsys, root, id); err != nil {
		return fmt.Errorf("remove fileset %v: %w", id, err)
	}
	return nil
}

func removeFiles(fsys vfs.FS, root string, id ID) error {
	dir := ShardDir(root, id.Namespace, id.Shard)
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := createEmpty(fsys, filePath(root, id, kindPending)); err != nil {
		return fmt.Errorf("create pending marker: %w", err)
	}
	if err := removeIfExists(fsys, filePath(root, id, kindCheckpoint)); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	for _, k := range kinds {
		if k == kindCheckpoint {
			continue
		}
		if err := removeIfExists(fsys, filePath(root, id, k)); err != nil {
			return err
		}
	}
	if err := removeIfExists(fsys, filePath(root, id, kindPending)); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

func removeIfExists(fsys vfs.FS, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Damaged is a fileset found without a valid checkpoint and without the
// pending marker of an interrupted removal: its files were moved aside
// (Moved) and Err says what is wrong.
type Damaged struct {
	ID    ID
	Err   error
	Moved []string
}

// ResolveIncomplete sorts out every fileset of a shard without a valid
// checkpoint, as ResolveIncompleteBlocks does for version 2 volumes: with
// the pending marker Remove leaves (an interrupted removal) its files are
// deleted and counted in removed; without it (a deleted or damaged
// checkpoint, or a crash of a Write, which the storage engine no longer
// does) they are moved aside, never deleted, and returned in damaged. It
// must not run concurrently with a Write or Remove in the shard; the
// storage engine calls it at startup, before flushing.
func ResolveIncomplete(fsys vfs.FS, root, namespace string, shard uint32) (removed int, damaged []Damaged, err error) {
	removed, damaged, err = resolveIncomplete(fsys, root, namespace, shard)
	if err != nil {
		return removed, damaged, fmt.Errorf("resolve incomplete filesets %s/%d: %w", namespace, shard, err)
	}
	return removed, damaged, nil
}

func resolveIncomplete(fsys vfs.FS, root, namespace string, shard uint32) (removed int, damaged []Damaged, err error) {
	groups, err := scan(fsys, root, namespace, shard)
	if err != nil {
		return 0, nil, err
	}
	for _, g := range groups {
		var cpErr error = fs.ErrNotExist
		if g.kinds[kindCheckpoint] {
			_, cpErr = readCheckpoint(fsys, filePath(root, g.id, kindCheckpoint), g.id)
			if cpErr != nil && !errors.Is(cpErr, ErrCorrupt) && !errors.Is(cpErr, fs.ErrNotExist) {
				return removed, damaged, cpErr
			}
		}
		switch {
		case cpErr == nil && g.kinds[kindPending]:
			if err := removeIfExists(fsys, filePath(root, g.id, kindPending)); err != nil {
				return removed, damaged, fmt.Errorf("remove stale pending marker of %v: %w", g.id, err)
			}
		case cpErr == nil:
		case g.kinds[kindPending]:
			if err := removeFiles(fsys, root, g.id); err != nil {
				return removed, damaged, fmt.Errorf("fileset %v: %w", g.id, err)
			}
			if len(g.kinds) > 1 {
				removed++
			}
		default:
			if errors.Is(cpErr, fs.ErrNotExist) {
				cpErr = fmt.Errorf("%s: %w: checkpoint missing, and no removal of the fileset was in progress",
					filePath(root, g.id, kindCheckpoint), ErrCorrupt)
			}
			moved, err := MoveAside(fsys, root, g.id)
			if err != nil {
				return removed, damaged, fmt.Errorf("damaged fileset %v (%v): %w", g.id, cpErr, err)
			}
			damaged = append(damaged, Damaged{ID: g.id, Err: cpErr, Moved: moved})
		}
	}
	return removed, damaged, nil
}

// CorruptSuffix is appended to the names of a fileset's files by
// MoveAside. Such names are not fileset names: List, Open and
// ResolveIncomplete ignore them, so nothing deletes them.
const CorruptSuffix = ".corrupt"

// MoveAside renames the files of a fileset that failed its checks to
// <name>.corrupt, keeping them for inspection and freeing the fileset's
// name, so the block can be written again (its data may come back from
// the commit log or from peers). The checkpoint goes last: a crash midway
// leaves the fileset still complete-looking but unreadable, and the next
// start moves the rest. Missing files are skipped. It returns the paths
// the files now have.
func MoveAside(fsys vfs.FS, root string, id ID) ([]string, error) {
	if err := id.validate(); err != nil {
		return nil, fmt.Errorf("move fileset %v aside: %w", id, err)
	}
	var moved []string
	order := make([]fileKind, 0, len(kinds))
	for _, k := range kinds {
		if k != kindCheckpoint {
			order = append(order, k)
		}
	}
	for _, k := range append(order, kindCheckpoint) {
		p := filePath(root, id, k)
		if _, err := fsys.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := fsys.Rename(p, p+CorruptSuffix); err != nil {
			return moved, fmt.Errorf("move fileset %v aside: %w", id, err)
		}
		moved = append(moved, p+CorruptSuffix)
	}
	if err := fsys.SyncDir(ShardDir(root, id.Namespace, id.Shard)); err != nil {
		return moved, fmt.Errorf("move fileset %v aside: sync directory: %w", id, err)
	}
	return moved, nil
}
