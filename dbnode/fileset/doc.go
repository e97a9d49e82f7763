// Package fileset stores one sealed block of one shard of one namespace as
// a set of immutable, checksummed files: a fileset, identified by
// (namespace, shard, blockStart, volume).
//
// Layout on disk (docs/format/fileset.md has every byte):
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
// without a checkpoint, which List ignores and RemoveIncomplete deletes.
// Remove deletes the checkpoint first (and fsyncs the directory) for the
// same reason: a crash midway leaves an incomplete, ignored fileset.
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
//	  |        RemoveIncomplete              v                            | first, then the rest
//	  +------------------------------- incomplete <-----------------------+
//
// Readers (Open) hold the index (IDs and data locations) in memory and read
// data pages on demand. Pages are zstd-compressed independently, about
// 64 KiB of payload each, and decompressed pages are kept in a byte-bounded
// LRU (PageCache) shared by readers.
package fileset
