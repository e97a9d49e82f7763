package fileset

import "errors"

var (
	// ErrCorrupt is wrapped by every error that reports bad bytes on disk:
	// a checksum mismatch, a truncated file, an impossible field. The
	// message names the file and the problem.
	ErrCorrupt = errors.New("fileset corrupt")
	// ErrExists is returned by Write when a complete fileset with the same
	// ID is already on disk; filesets are immutable, a rewrite of a block is
	// a new volume.
	ErrExists = errors.New("fileset already exists")
	// ErrInvalidInput is wrapped by Write errors caused by the arguments
	// (unsorted or duplicate series, bad ID, bad block size).
	ErrInvalidInput = errors.New("invalid fileset input")
	// ErrClosed is returned by Reader methods after Close.
	ErrClosed = errors.New("fileset reader closed")
)
