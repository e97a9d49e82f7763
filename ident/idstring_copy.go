//go:build slicelabels || dedupelabels

package ident

// idString copies id: a slicelabels set keeps the very strings it was built
// from, and dedupelabels interns names and values in a symbol table, so
// they must not alias memory that may change.
func idString(id []byte) string { return string(id) }
