package fileset

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Remove deletes every file of a fileset. The checkpoint goes first and
// its removal is made durable before the other files are touched, so a
// crash midway leaves an incomplete fileset that List ignores. Removing a
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

// RemoveIncomplete deletes the files of every fileset in a shard that has
// no valid checkpoint (left by a crash or a failed Write) and returns how
// many filesets it removed. It must not run concurrently with a Write to the
// same shard, whose files are incomplete until its last step; the storage
// engine calls it at startup, before flushing.
func RemoveIncomplete(fsys vfs.FS, root, namespace string, shard uint32) (int, error) {
	n, err := removeIncomplete(fsys, root, namespace, shard)
	if err != nil {
		return n, fmt.Errorf("remove incomplete filesets %s/%d: %w", namespace, shard, err)
	}
	return n, nil
}

func removeIncomplete(fsys vfs.FS, root, namespace string, shard uint32) (int, error) {
	groups, err := scan(fsys, root, namespace, shard)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, g := range groups {
		if g.kinds[kindCheckpoint] {
			ok, err := complete(fsys, root, g.id)
			if err != nil {
				return removed, err
			}
			if ok {
				continue
			}
		}
		if err := removeFiles(fsys, root, g.id); err != nil {
			return removed, fmt.Errorf("fileset %v: %w", g.id, err)
		}
		removed++
	}
	return removed, nil
}

// CorruptSuffix is appended to the names of a fileset's files by
// MoveAside. Such names are not fileset names: List, Open and
// RemoveIncomplete ignore them, so nothing deletes them.
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
