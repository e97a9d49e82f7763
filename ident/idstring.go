//go:build !slicelabels && !dedupelabels

package ident

import "unsafe"

// idString returns id's bytes as a string without copying them. Safe
// with the default (stringlabels) implementation of labels, whose
// ScratchBuilder copies names and values into the set it builds: the
// string does not outlive the LabelsWith call that made it, during which
// id does not change.
func idString(id []byte) string { return unsafe.String(unsafe.SliceData(id), len(id)) }
