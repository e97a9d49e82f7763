// Package index is the tag (inverted) index of one namespace: which series
// carry which label pairs, in which blocks of time. It answers Prometheus
// label matchers (=, !=, =~, !~) for queries, /api/v1/series, /labels and
// /label/<name>/values.
//
// # Structure
//
//	seriesTable                            block (one per blockStart)
//	  stripes[256]: (hash tag, ref) slots    all:      roaring bitmap of refs
//	  ids: ref -> ID, pages of 4096          names:    name -> value table
//	  free: released refs, reused            values:   (hash tag, ref) slots,
//	                                                   or a bitmap for a value
//	                                                   of 2+ series
//	                                         present:  lock-free bitset of refs
//
// Every distinct series ID gets a dense uint32 ref, so a label pair's
// postings are a compressed bitmap rather than a list of IDs, and AND, OR
// and AND NOT of matchers are bitmap operations. The ID is the only copy of
// the series' label bytes: the ref -> ID pages hold it once (the storage
// engine's own string for the series, given through InsertString, so
// storage and index share it); the ID -> ref
// direction stores just a hash tag and the ref (8 bytes a slot, nothing for
// the GC to scan, growth without rehashing IDs). A block's value table
// does the same for a value seen by one series (a pod, a container, a
// series number): a tag and the ref, the value read back from the ID when
// needed; a value of several series keeps a substring of a stored ID and
// a bitmap. So names and values are interned for free, and Query returns
// IDs as byte slices over that same memory. A block costs a few bytes per
// series per label, never a copy of labels. About 57 bytes a series in
// all, the ID aside, for `tessera bench`'s labels at a million series
// (one of them unique per series; BenchmarkIndexBytesPerSeries).
//
// Blocks exist because series come and go: a query for last hour must not
// return a pod that died yesterday, and retention must be able to forget
// old series. Refs are global, so results of several blocks combine with a
// bitmap union, and DropBlocksBefore frees the refs (and ID bytes) of series
// left in no block.
//
// Most label pairs in real workloads belong to one series (an instance, a
// pod, a path); an empty roaring bitmap costs ~150 bytes, and a Go map
// entry ~55, so a pair seen by one series is one 8-byte slot of its value
// table until a second series arrives.
//
// # Matching
//
// Prometheus semantics: a label a series lacks reads as "". A matcher that
// does not accept "" narrows: its result is the union of the postings of
// the values it accepts (found directly for = and literal alternations like
// =~"a|b", by testing every value otherwise). A matcher that accepts ""
// ({a!="x"}, {a=""}, {a=~".*"}, {a!~"x.+"}) trims: the candidates, or the
// block's all-series bitmap when nothing narrowed them, minus the postings
// of the values it rejects. Narrowing matchers run first, cheapest first;
// once few candidates are left, a regexp over a label with many values is
// checked against each candidate's own ID instead of every value.
//
// # Concurrency
//
// The write path is Insert of a series already in its block: one hash, a
// striped read lock, a probe of the stripe's table, an atomic load of the
// block set and one bit test in the block's presence bitset; no allocation
// and no lock shared by all writers. A series new to a block takes the
// block's write lock; a new series also its stripe's write lock. Queries hold
// block read locks while matching and turn refs into IDs without locks.
//
// DropBlocksBefore first removes blocks from the live set, which waits for
// in-flight queries (a query must not have a ref freed and reused between
// matching and reading its ID); then it frees the refs left in no live block
// while queries and inserts go on. It frees a ref only under the stripe lock
// of its ID, which any insert of that series holds while adding it to a
// block, so an insert never adds a ref that is being freed.
//
// The index is in memory only: at start the storage engine rebuilds it by
// re-inserting the IDs of its filesets and commit log.
package index
