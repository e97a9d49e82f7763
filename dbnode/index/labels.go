package index

import (
	"fmt"
	"unsafe"

	"github.com/tessera-tsdb/tessera/ident"
)

// The index keeps every series ID exactly once, as a Go string in the series
// table. Label names and values used as postings keys are substrings of those
// strings, and Query hands the IDs out as byte slices over the same memory, so
// no label byte is ever copied per block or per query. The helpers below are
// the only places that convert between the two views; the conversions are
// safe because nothing ever writes to an ID after it was copied in.

// bytesOf returns the bytes of s without copying. The result must not be
// modified.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// stringOf returns b as a string without copying. b must alias an immutable
// string (a stored ID).
func stringOf(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// rangeLabels calls fn for every label of a stored (already validated) ID,
// passing name and value as substrings of id.
func rangeLabels(id string, fn func(name, value string)) {
	// A stored ID was validated on its way in; an error here is impossible.
	_ = ident.Range(bytesOf(id), func(name, value []byte) {
		fn(stringOf(name), stringOf(value))
	})
}

// validateID checks that id decodes and is canonical: at least one label,
// names non-empty and strictly increasing (sorted, no duplicates). Only such
// IDs give every matcher one unambiguous value per label name.
func validateID(id []byte) error {
	if len(id) == 0 {
		return fmt.Errorf("%w: no labels", ident.ErrMalformedID)
	}
	if uint64(len(id)) > maxIDLen {
		return fmt.Errorf("%w: %d bytes, over %d", ident.ErrMalformedID, len(id), uint64(maxIDLen))
	}
	var prev []byte
	var bad error
	first := true
	err := ident.Range(id, func(name, _ []byte) {
		if bad != nil {
			return
		}
		switch {
		case len(name) == 0:
			bad = fmt.Errorf("%w: empty label name", ident.ErrMalformedID)
		case !first && string(name) <= string(prev):
			bad = fmt.Errorf("%w: label %q not sorted after %q", ident.ErrMalformedID, name, prev)
		}
		prev, first = name, false
	})
	if err != nil {
		return err
	}
	return bad
}
