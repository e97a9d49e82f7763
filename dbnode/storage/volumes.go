package storage

import (
	"errors"
	"fmt"
	"sort"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
)

// maxVolumesPerBlock bounds the sources a block is served from: version 2
// volumes still serving a shard, plus shards served from version 1
// (per-shard) filesets. Cold writes and blocks streamed from peers add a
// volume holding only the shards they changed; once a flush would take a
// block past this bound, it also carries into the new volume every shard
// not served from the block's largest volume (sealed payloads copied, not
// decoded), so the block is left with two, and the others go. So a block keeps
// at most 3 x maxVolumesPerBlock files however many shards and cold
// writes it has, and filesets of the old layout are converted at the
// first tick after start when they are more than that.
const maxVolumesPerBlock = 8

// blockVolumes is the bookkeeping of one block of one namespace: which
// version 2 volumes serve how many shards (a volume is removed when that
// drops to zero), how many shards are served from version 1 filesets, and
// the next volume number. Guarded by Database.tickMu (every install,
// retirement and flush holds it; loadFilesets runs before anything else).
type blockVolumes struct {
	next  int
	users map[int]int // volume -> shards whose reader is from it
	v1    int         // shards served from a version 1 fileset
}

func (ns *namespace) volumes(bs int64) *blockVolumes {
	bv := ns.vols[bs]
	if bv == nil {
		bv = &blockVolumes{users: map[int]int{}}
		ns.vols[bs] = bv
	}
	return bv
}

// largest is the version 2 volume serving the most shards (the lowest
// number on a tie), -1 for none.
func (bv *blockVolumes) largest() int {
	best, most := -1, 0
	for v, n := range bv.users {
		if n > most || n == most && v < best {
			best, most = v, n
		}
	}
	return best
}

// sourcesOf counts what block bs is served from (see maxVolumesPerBlock).
func (db *Database) sourcesOf(ns *namespace, bs int64) int {
	bv := ns.vols[bs]
	if bv == nil {
		return 0
	}
	return len(bv.users) + bv.v1
}

// serve records that a shard's reader r is now served.
func (ns *namespace) serve(r *fileset.Reader) {
	if holds, _ := r.HoldsHistograms(); holds {
		ns.flushedHist.Store(true)
	}
	id := r.ID()
	bv := ns.volumes(id.BlockStart)
	if r.Version() == 1 {
		bv.v1++
	} else {
		bv.users[id.Volume]++
	}
	if id.Volume >= bv.next {
		bv.next = id.Volume + 1
	}
}

// releaseVolume records that a shard stopped serving from the version 2
// volume id names, and removes the volume when no shard serves from it.
func (db *Database) releaseVolume(id fileset.ID) error {
	ns := db.namespaces[id.Namespace]
	if ns == nil {
		return nil
	}
	bv := ns.vols[id.BlockStart]
	if bv == nil || bv.users[id.Volume] == 0 {
		return nil
	}
	bv.users[id.Volume]--
	if bv.users[id.Volume] > 0 {
		return nil
	}
	delete(bv.users, id.Volume)
	return fileset.RemoveBlock(db.opts.FS, db.dataDir(), fileset.BlockID{Namespace: id.Namespace, BlockStart: id.BlockStart, Volume: id.Volume})
}

// releaseV1 records that a shard stopped serving from a version 1
// fileset (whose files removeOnClose deletes).
func (db *Database) releaseV1(id fileset.ID) {
	if ns := db.namespaces[id.Namespace]; ns != nil {
		if bv := ns.vols[id.BlockStart]; bv != nil && bv.v1 > 0 {
			bv.v1--
		}
	}
}

// volumeWrite is a new volume of one block being written: shards are
// added in increasing order, then install makes it the one reads see.
type volumeWrite struct {
	db     *Database
	ns     *namespace
	id     fileset.BlockID
	w      *fileset.BlockWriter
	shards []*shard
	prevs  []*fileset.Reader
	// installed: the readers install swapped in, one per shard in add
	// order (a flush keys what it sealed by them: sealedSamples).
	installed []*fileset.Reader
}

// newVolumeWrite starts the next volume of block bs. The volume number is
// taken whether or not the write succeeds, so a failed attempt whose files
// could not all be removed never blocks the next one.
func (db *Database) newVolumeWrite(ns *namespace, bs int64) (*volumeWrite, error) {
	bv := ns.volumes(bs)
	id := fileset.BlockID{Namespace: ns.opts.Name, BlockStart: bs, Volume: bv.next}
	bv.next++
	w, err := fileset.CreateBlock(db.opts.FS, db.dataDir(), id, ns.blockSize)
	if err != nil {
		return nil, err
	}
	return &volumeWrite{db: db, ns: ns, id: id, w: w}, nil
}

// add writes shard sh's series (sorted by ID); prev is the reader the
// shard serves the block from now (nil for none), retired at install.
func (vw *volumeWrite) add(sh *shard, prev *fileset.Reader, series []fileset.Series) error {
	if err := vw.w.WriteShard(sh.id, series); err != nil {
		return err
	}
	vw.shards = append(vw.shards, sh)
	vw.prevs = append(vw.prevs, prev)
	return nil
}

func (vw *volumeWrite) abort() { vw.w.Abort() }

// install commits the volume and makes it the one reads see for each of
// its shards: series are indexed first, so a read that finds the new
// volume finds every series in it; then each shard's reader is swapped
// in and its previous reader retired to the graveyard (closed and its
// files released on the next tick, after reads holding it finish). It
// returns the volume's size on disk. The caller holds tickMu.
func (vw *volumeWrite) install() (int64, error) {
	db, ns, bs := vw.db, vw.ns, vw.id.BlockStart
	if err := vw.w.Finish(); err != nil {
		return 0, err
	}
	v, err := fileset.OpenBlock(db.opts.FS, db.dataDir(), vw.id, fileset.OpenOptions{})
	if err != nil {
		return 0, fmt.Errorf("reopen written volume %v: %w", vw.id, err)
	}
	defer v.Close()
	readers := make([]*fileset.Reader, 0, len(vw.shards))
	fail := func(err error) (int64, error) {
		for _, r := range readers {
			_ = r.Close()
		}
		return 0, err
	}
	for _, sh := range vw.shards {
		r, ok, err := v.OpenShard(sh.id)
		if err == nil && !ok {
			err = fmt.Errorf("shard %d missing from written volume %v", sh.id, vw.id)
		}
		if err != nil {
			return fail(err)
		}
		readers = append(readers, r)
	}
	if ns.index != nil {
		for _, r := range readers {
			if err := r.RangeIndex(func(sid []byte, _ uint64, _ int, _ int) error {
				return ns.index.Insert(append([]byte(nil), sid...), bs)
			}); err != nil {
				return fail(fmt.Errorf("index volume %v: %w", vw.id, err))
			}
		}
	}
	for i, sh := range vw.shards {
		sh.mu.Lock()
		sh.blocks[bs] = readers[i]
		sh.mu.Unlock()
		ns.serve(readers[i])
		if prev := vw.prevs[i]; prev != nil {
			db.graveyard = append(db.graveyard, removeOnClose{r: prev, db: db})
		}
	}
	vw.installed = readers
	return v.DiskSize(), nil
}

// candidate is one place a shard's block may be served from at start.
type candidate struct {
	volume int
	v1     *fileset.ID     // a version 1 fileset
	v2     *fileset.Volume // or a version 2 volume holding the shard
}

// loadFilesets opens, for every block of every shard, the newest complete
// volume holding it, whether a version 1 fileset (per shard) or a shard's
// section of a version 2 volume; it deletes incomplete, superseded and
// expired files and indexes the series it serves.
//
// Damage costs only what is damaged: a version 1 fileset or a version 2
// volume failing its checks (checkpoint, index head) is moved aside; a
// version 2 shard section failing its checks costs that shard's block in
// that volume. Either way an older volume holding the shard's block is
// served instead, and the commit log's data for it flushes again.
func (db *Database) loadFilesets() error {
	now := db.opts.Now().UnixMilli()
	for _, ns := range db.nsList {
		if err := db.loadNamespace(ns, ns.blockStart(now-ns.opts.Retention.Milliseconds())); err != nil {
			return err
		}
	}
	return nil
}

func (db *Database) loadNamespace(ns *namespace, expireBefore int64) error {
	fsys, root, name := db.opts.FS, db.dataDir(), ns.opts.Name
	rel, err := fileset.ReadReleased(fsys, root, name)
	switch {
	case errors.Is(err, fileset.ErrCorrupt):
		// Without the record, dropped shards' sections are served again
		// until the node's release loop drops them once more.
		db.unreadable("released shards of "+name, err, "", nil)
	case err != nil:
		return err
	}
	for _, r := range rel {
		if r.BlockStart >= expireBefore {
			ns.released[releaseKey{shard: r.Shard, bs: r.BlockStart}] = r.Volume
			// A release covers every volume up to r.Volume, so no new
			// volume may take such a number again, even when the released
			// ones are gone from disk: a shard owned again would write its
			// data into a volume the next start hides as released.
			if bv := ns.volumes(r.BlockStart); r.Volume >= bv.next {
				bv.next = r.Volume + 1
			}
		}
	}
	isReleased := func(shard uint32, bs int64, vol int) bool {
		v, ok := ns.released[releaseKey{shard: shard, bs: bs}]
		return ok && vol <= v
	}
	cands := map[uint32]map[int64][]candidate{}
	addCand := func(shard uint32, bs int64, c candidate) {
		m := cands[shard]
		if m == nil {
			m = map[int64][]candidate{}
			cands[shard] = m
		}
		m[bs] = append(m[bs], c)
		if bv := ns.volumes(bs); c.volume >= bv.next {
			bv.next = c.volume + 1
		}
	}

	// Version 1: one directory per shard.
	shards, err := fileset.Shards(fsys, root, name)
	if err != nil {
		return fmt.Errorf("list shards of namespace %s: %w", name, err)
	}
	for _, shardID := range shards {
		if shardID >= db.opts.NumShards {
			db.opts.Logger.Warn("ignoring fileset shard beyond numShards", "namespace", name, "shard", shardID)
			continue
		}
		n, damaged, err := fileset.ResolveIncomplete(fsys, root, name, shardID)
		if err != nil {
			return fmt.Errorf("resolve incomplete filesets of shard %d: %w", shardID, err)
		}
		if n > 0 {
			db.opts.Logger.Warn("removed filesets of interrupted removals", "namespace", name, "shard", shardID, "count", n)
		}
		for _, d := range damaged {
			db.unreadable(d.ID.String(), d.Err, fileset.ShardDir(root, name, shardID), d.Moved)
			db.rollupDamaged(ns, d.ID.BlockStart)
		}
		ids, err := fileset.List(fsys, root, name, shardID)
		if err != nil {
			return fmt.Errorf("list filesets of shard %d: %w", shardID, err)
		}
		for i := range ids {
			id := ids[i]
			if id.BlockStart < expireBefore || isReleased(shardID, id.BlockStart, id.Volume) {
				if err := fileset.Remove(fsys, root, id); err != nil {
					return fmt.Errorf("remove expired or released fileset %+v: %w", id, err)
				}
				continue
			}
			addCand(shardID, id.BlockStart, candidate{volume: id.Volume, v1: &id})
		}
	}

	// Version 2: volumes in the namespace directory.
	// Without a valid checkpoint: an interrupted flush or removal (its
	// pending marker says so) is deleted, anything else is damage, kept.
	n, damaged, err := fileset.ResolveIncompleteBlocks(fsys, root, name)
	if err != nil {
		return err
	}
	if n > 0 {
		db.opts.Logger.Warn("removed volumes of interrupted flushes or removals", "namespace", name, "count", n)
	}
	for _, d := range damaged {
		db.unreadable(d.ID.String(), d.Err, fileset.NamespaceDir(root, name), d.Moved)
		db.rollupDamaged(ns, d.ID.BlockStart)
	}
	bids, err := fileset.ListBlocks(fsys, root, name)
	if err != nil {
		return err
	}
	var volumes []*fileset.Volume
	defer func() {
		for _, v := range volumes {
			_ = v.Close()
		}
	}()
	keep := map[fileset.BlockID]bool{} // volumes not to remove even if they serve nothing
	for _, bid := range bids {
		if bid.BlockStart < expireBefore {
			if err := fileset.RemoveBlock(fsys, root, bid); err != nil {
				return fmt.Errorf("remove expired volume: %w", err)
			}
			continue
		}
		if bv := ns.volumes(bid.BlockStart); bid.Volume >= bv.next {
			bv.next = bid.Volume + 1
		}
		v, err := fileset.OpenBlock(fsys, root, bid, fileset.OpenOptions{})
		if err != nil {
			moved, merr := fileset.MoveBlockAside(fsys, root, bid)
			if merr != nil {
				return fmt.Errorf("unreadable volume %v (%v): %w", bid, err, merr)
			}
			db.unreadable(fmt.Sprintf("%v", bid), err, fileset.NamespaceDir(root, name), moved)
			db.rollupDamaged(ns, bid.BlockStart)
			continue
		}
		volumes = append(volumes, v)
		for _, s := range v.Shards() {
			if s >= db.opts.NumShards {
				db.opts.Logger.Warn("ignoring volume shard beyond numShards", "volume", bid, "shard", s)
				keep[bid] = true
				continue
			}
			if isReleased(s, bid.BlockStart, bid.Volume) {
				continue // dropped from this node since
			}
			addCand(s, bid.BlockStart, candidate{volume: bid.Volume, v2: v})
		}
	}

	shardIDs := make([]uint32, 0, len(cands))
	for s := range cands {
		shardIDs = append(shardIDs, s)
	}
	sort.Slice(shardIDs, func(i, j int) bool { return shardIDs[i] < shardIDs[j] })
	for _, shardID := range shardIDs {
		sh := ns.shard(shardID)
		for bs, cs := range cands[shardID] {
			// Newest first; the old layout's numbers are below any
			// volume written since, but on a tie the new layout wins.
			sort.Slice(cs, func(i, j int) bool {
				if cs[i].volume != cs[j].volume {
					return cs[i].volume > cs[j].volume
				}
				return cs[i].v2 != nil && cs[j].v2 == nil
			})
			r, err := db.serveFirst(ns, shardID, cs, keep)
			if err != nil {
				return err
			}
			if r == nil {
				continue
			}
			sh.blocks[bs] = r
			ns.serve(r)
			if ns.index != nil {
				if err := r.RangeIndex(func(sid []byte, _ uint64, _ int, _ int) error {
					return ns.index.Insert(append([]byte(nil), sid...), bs)
				}); err != nil {
					return fmt.Errorf("index fileset %+v: %w", r.ID(), err)
				}
			}
		}
	}
	// A volume no shard is served from is superseded everywhere: remove it.
	for _, v := range volumes {
		id := v.ID()
		if keep[id] || ns.volumes(id.BlockStart).users[id.Volume] > 0 {
			continue
		}
		if err := fileset.RemoveBlock(fsys, root, id); err != nil {
			return fmt.Errorf("remove obsolete volume: %w", err)
		}
	}
	return nil
}

// serveFirst opens the first candidate (newest first) that opens, and
// removes the version 1 filesets it supersedes. A candidate that fails
// its checks is reported and the next one tried: a damaged newest volume
// must not cost the data an older one still holds.
func (db *Database) serveFirst(ns *namespace, shardID uint32, cs []candidate, keep map[fileset.BlockID]bool) (*fileset.Reader, error) {
	fsys, root := db.opts.FS, db.dataDir()
	var served *fileset.Reader
	for _, c := range cs {
		if served != nil {
			if c.v1 != nil {
				if err := fileset.Remove(fsys, root, *c.v1); err != nil {
					return nil, fmt.Errorf("remove obsolete fileset %+v: %w", *c.v1, err)
				}
			}
			continue
		}
		if c.v1 != nil {
			r, err := fileset.Open(fsys, root, *c.v1)
			if err == nil {
				served = r
				continue
			}
			// Its files are moved aside, kept for inspection, so the
			// block can be flushed again.
			moved, merr := fileset.MoveAside(fsys, root, *c.v1)
			if merr != nil {
				return nil, fmt.Errorf("unreadable fileset %v (%v): %w", *c.v1, err, merr)
			}
			db.unreadable(c.v1.String(), err, fileset.ShardDir(root, c.v1.Namespace, c.v1.Shard), moved)
			db.rollupDamaged(ns, c.v1.BlockStart)
			continue
		}
		r, _, err := c.v2.OpenShard(shardID)
		if err == nil {
			served = r
			continue
		}
		// A damaged section cannot be moved aside alone: the volume is
		// kept (other shards may serve from it) until retention.
		keep[c.v2.ID()] = true
		db.unreadable(fmt.Sprintf("%v shard %d", c.v2.ID(), shardID), err, "", nil)
		db.rollupDamaged(ns, c.v2.ID().BlockStart)
	}
	return served, nil
}

// unreadable logs, counts and records a fileset, volume or shard section
// that failed its checks at start.
func (db *Database) unreadable(what string, err error, dir string, moved []string) {
	db.opts.Logger.Error("unreadable fileset; an older volume, if any, is served instead",
		"fileset", what, "err", err, "moved_to", moved)
	db.metrics.filesetsUnreadable.Inc(1)
	msg := fmt.Sprintf("%s: %v", what, err)
	if len(moved) > 0 {
		msg += fmt.Sprintf(" (its files are kept in %s as *%s)", dir, fileset.CorruptSuffix)
	}
	db.recovery.UnreadableFilesets = append(db.recovery.UnreadableFilesets, msg)
}
