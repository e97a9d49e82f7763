// Package commitlog is the node's write-ahead log: every batch the storage
// engine accepts is appended here before it is acknowledged, so that an
// acknowledged write survives kill -9 (sync mode) and the commitlog
// bootstrapper can rebuild in-memory buffers after a restart.
//
// The on-disk format is written down in docs/format/commitlog.md. In short:
// numbered files, a checksummed header, then one checksummed record per
// Write call, each starting with a marker; series IDs are defined once per
// file and referred to by small integer refs afterwards.
//
// # Damage
//
// Replay skips a damaged record and resynchronises on the next intact one
// (found by its marker, trusted by its checksum), so damage costs the
// records it touches plus the samples of series defined in them. A file
// damaged in the middle is rewritten with what replay kept and the
// original is kept as <file>.corrupt; damage at the very end is a torn
// tail (normal after a crash) and is truncated.
//
// # Concurrency: one flusher, group commit
//
// Writers never touch the file. Write appends the batch to a shared queue
// under a mutex and (sync mode) waits on the queue's group. A single flusher
// goroutine owns the file and the per-file ref tables; it swaps the queue
// out, encodes every queued batch as one record each, issues one write and
// one fsync for the lot, then wakes the whole group with the result:
//
//	writers ──append──▶ queue(group N+1)      flusher: encode+write+fsync group N
//	                         │                                 │
//	                         └──── swapped out when N is done ◀┘──▶ close(done N)
//
// While group N is being fsynced, group N+1 fills up, so the number of
// fsyncs per second is bounded by the disk, not by the number of writers.
// Write is Enqueue then Ticket.Wait, and a group is only handed to the
// flusher when one of its writers waits: a caller that does its own work
// in between (the storage engine applies the batch to memory) keeps the
// group open for the writers arriving meanwhile.
// Async mode uses the same queue; nobody waits, the flusher writes when
// enough bytes are queued and writes+fsyncs every FlushEvery.
//
// # Failure
//
// A write or fsync error fails every batch in the group that hit it. The
// flusher then truncates the file back to the end of the last good record
// and rotates to a new file (lazily, on the next write): after an fsync
// error the kernel's view of the old file cannot be trusted, and a fresh
// file also resets the ref tables that the failed records may have
// extended. If the truncate itself fails, the half record is a torn tail of
// a file that is never appended to again, which replay cuts off while still
// replaying the later files.
package commitlog
