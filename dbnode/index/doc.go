// Package index is the tag (inverted) index of one namespace: which series
// carry which label pairs, in which blocks of time. It answers Prometheus
// label matchers (=, !=, =~, !~) for queries, /api/v1/series, /labels and
// /label/<name>/values.
//
// # Structure
//
//	seriesTable                         per block (blockStart -> block)
//	  ID bytes -> ref (256 striped maps)   all:   roaring bitmap of refs
//	  ref -> ID string (dense slice)       names: name -> value -> postings
//	  free refs (reused)                   postings: one inline ref, or a roaring bitmap
//
// Every distinct series ID gets a dense uint32 ref, so a label pair's
// postings are a compressed bitmap rather than a list of IDs, and AND, OR
// and AND NOT of matchers are bitmap operations. The ID is the only copy of
// the series' label bytes: the table's map key and its ref slot share one
// string, postings keys are substrings of stored IDs (interned for free),
// and Query returns IDs as byte slices over that same memory. A block
// therefore costs a few bytes per series per label, not a copy of labels.
//
// Blocks exist because series come and go: a query for last hour must not
// return a pod that died yesterday, and retention must be able to forget
// old series. Refs are global, so results of several blocks combine with a
// bitmap union, and DropBlocksBefore frees the refs (and ID bytes) of series
// left in no block.
//
// Most label pairs in real workloads belong to one series (an instance, a
// pod, a path); an empty roaring bitmap costs ~150 bytes, so a pair seen by
// one series keeps its ref inline until a second one arrives.
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
// The write path is Insert of a series already in its block: a striped read
// lock, a map lookup, an atomic load of the block set and one bit test under
// the block's read lock; no allocation. New series take their stripe's write
// lock and the block's write lock. Queries hold block read locks while
// matching and a read lock on the table while turning refs into IDs.
// DropBlocksBefore excludes queries (so a ref cannot be freed and reused
// between matching and reading its ID) but not inserts: it frees a ref only
// under the stripe lock of its ID, which any insert of that series holds
// while adding it to a block.
//
// The index is in memory only: at start the storage engine rebuilds it by
// re-inserting the IDs of its filesets and commit log.
package index
