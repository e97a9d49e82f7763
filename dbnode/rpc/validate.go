package rpc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tessera-tsdb/tessera/ident"
)

// validateID checks that id is a canonical series ID (labels sorted by
// name, names non-empty) before anything is written: a malformed ID would
// reach the commit log and then fail in the index, a partial write that a
// retry could never fix.
func validateID(id []byte) error {
	var prev []byte
	var bad error
	err := ident.Range(id, func(name, _ []byte) {
		switch {
		case bad != nil:
		case len(name) == 0:
			bad = errors.New("empty label name")
		case prev != nil && bytes.Compare(name, prev) <= 0:
			bad = fmt.Errorf("label %q not sorted after %q", name, prev)
		}
		prev = name
	})
	if err != nil {
		return err
	}
	if prev == nil {
		return errors.New("no labels")
	}
	return bad
}
