// Package fileset stores sealed blocks of a namespace as immutable,
// checksummed files.
//
// Version 2 (BlockWriter, OpenBlock, ListBlocks, RemoveBlock) is what the
// storage engine writes: one volume of one block is three files in the
// namespace directory (data, index, checkpoint) holding a section per
// shard, so the file count and fsyncs of a flush do not grow with the
// number of shards; each shard's section has its own checksums, so damage
// to one costs that shard only. Volume.OpenShard gives the same Reader as
// version 1 for one shard.
//
// Version 1 (Write, Open, List, Remove) is the per-shard layout written
// before, still read; docs/format/fileset.md has every byte of both.
//
// Version 1 layout on disk:
//
//	<root>/<namespace>/<shard>/fileset-<blockStartMs>-<volume>-info.db
//	                                                          -index.db
//	                                                          -data.db
//	                                                          -digest.db
//	                                                          -checkpoint.db
//
// A fileset is complete only once its checkpoint file exists and is valid.
// Write creates info, index, data and digest under their final names, fsyncs
// them and the directory, and only then writes and fsyncs the checkpoint
// (and the directory again). A crash at any point before that leaves files
// without a checkpoint, which List ignores; at start ResolveIncomplete
// moves such files aside as damage (Write leaves no marker; the storage
// engine writes version 2 volumes, whose writer does). Remove marks the
// fileset pending and deletes the checkpoint first (and fsyncs the
// directory): a crash midway leaves an incomplete, ignored fileset with
// its marker, which ResolveIncomplete deletes.
//
// Volumes: a cold write to a block that was already flushed makes the
// storage engine write the merged block as volume+1. Once that volume is
// complete, lower volumes of the block are obsolete (Obsolete lists them)
// and may be removed.
//
// Lifecycle of one fileset:
//
//	         Write: info,index,data,digest        checkpoint written,
//	(none) ------------------------------> partial ------------------> complete
//	  ^       fsynced + dir fsync            |        fsynced, dir fsync  |
//	  |                                      | crash / error              | Remove: checkpoint
//	  |   ResolveIncomplete (if pending)     v                            | first, then the rest
//	  +------------------------------- incomplete <-----------------------+
//
// Readers (Open) hold the index (IDs and data locations) in memory and read
// data pages on demand. Pages are zstd-compressed independently, about
// 64 KiB of payload each, and decompressed pages are kept in a byte-bounded
// LRU (PageCache) shared by readers.
package fileset
