package vfs

import (
	"errors"
	"os"
	"sync"
)

// Op names an operation a Faulty FS can fail.
type Op int

const (
	OpWrite Op = iota + 1
	OpSync
	OpCreate
	OpRename
	OpRemove
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpCreate:
		return "create"
	case OpRename:
		return "rename"
	case OpRemove:
		return "remove"
	}
	return "unknown"
}

// ErrInjected is the error a Faulty FS returns for an injected fault.
var ErrInjected = errors.New("vfs: injected fault")

// Fault decides, per operation, whether to fail it. path is the file's
// name. For OpWrite, n is the length of the write; a fault may return
// short > 0 to write only that many bytes before failing (a short write).
type Fault func(op Op, path string, n int) (fail bool, short int)

// Faulty wraps an FS and fails the operations its Fault selects. The fault
// can be swapped at any time with Set, so a test can let setup succeed and
// then break the disk.
type Faulty struct {
	FS
	mu    sync.Mutex
	fault Fault
}

// NewFaulty wraps fs with no fault set.
func NewFaulty(fs FS) *Faulty { return &Faulty{FS: fs} }

// Set installs f (nil clears it).
func (f *Faulty) Set(fault Fault) {
	f.mu.Lock()
	f.fault = fault
	f.mu.Unlock()
}

func (f *Faulty) check(op Op, path string, n int) (bool, int) {
	f.mu.Lock()
	fault := f.fault
	f.mu.Unlock()
	if fault == nil {
		return false, 0
	}
	return fault(op, path, n)
}

func (f *Faulty) Create(name string) (File, error) {
	if fail, _ := f.check(OpCreate, name, 0); fail {
		return nil, &os.PathError{Op: "create", Path: name, Err: ErrInjected}
	}
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&os.O_CREATE != 0 {
		if fail, _ := f.check(OpCreate, name, 0); fail {
			return nil, &os.PathError{Op: "create", Path: name, Err: ErrInjected}
		}
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

func (f *Faulty) Rename(oldpath, newpath string) error {
	if fail, _ := f.check(OpRename, newpath, 0); fail {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: ErrInjected}
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f *Faulty) Remove(name string) error {
	if fail, _ := f.check(OpRemove, name, 0); fail {
		return &os.PathError{Op: "remove", Path: name, Err: ErrInjected}
	}
	return f.FS.Remove(name)
}

func (f *Faulty) SyncDir(path string) error {
	if fail, _ := f.check(OpSync, path, 0); fail {
		return &os.PathError{Op: "sync", Path: path, Err: ErrInjected}
	}
	return f.FS.SyncDir(path)
}

type faultyFile struct {
	File
	fs *Faulty
}

func (ff *faultyFile) Write(p []byte) (int, error) {
	if fail, short := ff.fs.check(OpWrite, ff.Name(), len(p)); fail {
		if short > 0 && short < len(p) {
			n, err := ff.File.Write(p[:short])
			if err != nil {
				return n, err
			}
			return n, &os.PathError{Op: "write", Path: ff.Name(), Err: ErrInjected}
		}
		return 0, &os.PathError{Op: "write", Path: ff.Name(), Err: ErrInjected}
	}
	return ff.File.Write(p)
}

func (ff *faultyFile) Sync() error {
	if fail, _ := ff.fs.check(OpSync, ff.Name(), 0); fail {
		return &os.PathError{Op: "sync", Path: ff.Name(), Err: ErrInjected}
	}
	return ff.File.Sync()
}
