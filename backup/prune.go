package backup

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/thanos-io/objstore"
)

// inProgressKey marks a backup being written; prune deletes no object
// while a fresh one exists (the running backup may reference objects it
// found in the bucket and did not upload again).
func inProgressKey(id string) string { return path.Join(backupsDir, id, "in-progress") }

// MarkInProgress records that backup id started at now.
func MarkInProgress(ctx context.Context, b objstore.Bucket, id string, now time.Time) error {
	return b.Upload(ctx, inProgressKey(id), strings.NewReader(strconv.FormatInt(now.UnixMilli(), 10)))
}

// ClearInProgress removes the mark once the manifest is written.
func ClearInProgress(ctx context.Context, b objstore.Bucket, id string) error {
	err := b.Delete(ctx, inProgressKey(id))
	if b.IsObjNotFoundErr(err) {
		return nil
	}
	return err
}

// PruneOptions say which backups to keep: the KeepLast newest and every
// one started within KeepWithin of Now (at least one rule must be set).
type PruneOptions struct {
	KeepLast   int
	KeepWithin time.Duration
	// Grace keeps unreferenced objects younger than this (a backup
	// writing them may not have a manifest yet), and in-progress marks
	// younger than it stop object deletion altogether.
	Grace  time.Duration
	Now    time.Time
	DryRun bool
}

// PruneResult says what Prune did (or, dry, would do).
type PruneResult struct {
	Kept           []string `json:"kept"`
	Deleted        []string `json:"deleted"`
	ObjectsDeleted int      `json:"objectsDeleted"`
	ObjectsKept    int      `json:"objectsKept"`
	// Blocked names the in-progress backups that kept objects from being
	// deleted.
	Blocked []string `json:"blocked,omitempty"`
}

// Prune deletes the backups the rules do not keep (their manifests
// first), then every object no kept backup references. An object a kept
// backup references is never deleted.
func Prune(ctx context.Context, b objstore.Bucket, o PruneOptions) (PruneResult, error) {
	if o.KeepLast <= 0 && o.KeepWithin <= 0 {
		return PruneResult{}, fmt.Errorf("prune: set --keep-last or --keep-within (refusing to delete every backup)")
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	all, err := List(ctx, b)
	if err != nil {
		return PruneResult{}, err
	}
	var res PruneResult
	referenced := map[string]bool{}
	var drop []*Manifest
	for i, m := range all {
		keep := (o.KeepLast > 0 && i >= len(all)-o.KeepLast) ||
			(o.KeepWithin > 0 && o.Now.Sub(time.UnixMilli(m.StartedMs)) <= o.KeepWithin)
		if !keep {
			drop = append(drop, m)
			continue
		}
		res.Kept = append(res.Kept, m.ID)
		for _, s := range m.Shards {
			for _, r := range s.Objects {
				referenced[r.Key] = true
			}
		}
	}
	for _, m := range drop {
		res.Deleted = append(res.Deleted, m.ID)
		if o.DryRun {
			continue
		}
		if err := b.Delete(ctx, ManifestKey(m.ID)); err != nil {
			return res, fmt.Errorf("prune: delete manifest of %s: %w", m.ID, err)
		}
	}
	// In-progress backups (fresh marks) hold every object.
	err = b.Iter(ctx, backupsDir+"/", func(dir string) error {
		id := strings.TrimSuffix(strings.TrimPrefix(dir, backupsDir+"/"), "/")
		rc, err := b.Get(ctx, inProgressKey(id))
		if b.IsObjNotFoundErr(err) {
			return nil
		}
		if err != nil {
			return err
		}
		defer rc.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(rc)
		ms, _ := strconv.ParseInt(strings.TrimSpace(buf.String()), 10, 64)
		if o.Now.Sub(time.UnixMilli(ms)) < o.Grace {
			res.Blocked = append(res.Blocked, id)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("prune: list backups: %w", err)
	}
	if len(res.Blocked) > 0 {
		return res, nil
	}
	var unref []string
	err = b.Iter(ctx, objectsDir+"/", func(name string) error {
		if referenced[name] {
			res.ObjectsKept++
			return nil
		}
		unref = append(unref, name)
		return nil
	}, objstore.WithRecursiveIter())
	if err != nil {
		return res, fmt.Errorf("prune: list objects: %w", err)
	}
	sort.Strings(unref)
	for _, name := range unref {
		attrs, err := b.Attributes(ctx, name)
		if b.IsObjNotFoundErr(err) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("prune: %s: %w", name, err)
		}
		if o.Now.Sub(attrs.LastModified) < o.Grace {
			res.ObjectsKept++
			continue
		}
		res.ObjectsDeleted++
		if o.DryRun {
			continue
		}
		if err := b.Delete(ctx, name); err != nil && !b.IsObjNotFoundErr(err) {
			return res, fmt.Errorf("prune: delete %s: %w", name, err)
		}
	}
	// Marks of backups that died long ago are dropped with their objects.
	return res, nil
}
