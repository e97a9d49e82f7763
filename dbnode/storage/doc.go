// Package storage is Tessera's storage engine: a database of namespaces,
// each split into virtual shards, each holding series.
//
// A series keeps, per block of time it has data in, an in-memory bucket of
// compressed streams (dbnode/encoding). In-order samples append to the
// first stream that can take them; an out-of-order sample opens another
// stream, and reads merge the streams with the later stream winning on equal
// timestamps, which is last-write-wins (see bucket.go for why first-fit
// preserves that order).
//
// Durability: a batch is appended to the commit log (dbnode/commitlog)
// before it is applied to memory and acknowledged. A block past its end
// plus bufferPast is flushed to an immutable fileset (dbnode/fileset); a
// cold write to a block already flushed is buffered again and the next flush
// writes a new volume holding the merged block. Commit log files are deleted
// once no block they hold data for has unflushed data in memory.
//
// Lifecycle of a block of one shard:
//
//	          write                 now >= end+bufferPast
//	(none) ----------> open bucket ----------------------> flushing
//	                        ^                                  |
//	                        | cold write                       | fileset written,
//	                        |                                  v bucket dropped
//	                        +------------------------------ flushed (fileset vN)
//	                                                           |
//	                                   now >= end+retention    v
//	                                                        expired (files removed)
package storage
