package commitlog

import (
	"fmt"
	"io"
	"os"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Suffixes of the files salvage leaves beside a damaged commit log file.
// Neither ends in fileSuffix, so replay, Files and Remove never see them.
const (
	// corruptSuffix: the damaged file as it was found, kept for
	// inspection. Nothing in Tessera deletes it; an operator does.
	corruptSuffix = ".corrupt"
	// salvageSuffix: the clean copy being written; renamed over the
	// damaged file once complete, removed at Open if a crash left it.
	salvageSuffix = ".salvage"
)

// salvage replaces the damaged file at path by a clean one holding every
// entry replay kept from it (the intact records, minus entries whose
// series definition was lost), re-encoded with fresh ref tables under the
// same seq, so the next replay reads it without resync and it keeps its
// place in replay order. The damaged bytes are first copied to
// path+corruptSuffix. Every step is durable before the next, and the
// clean file replaces the damaged one by one rename: a crash at any point
// leaves either the damaged file (salvaged again at the next Open) or
// the clean one.
func salvage(fs vfs.FS, dir, path string, seq uint64) (aside string, err error) {
	tmp := path + salvageSuffix
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("salvage commit log %s: %w", path, err)
	}
	err = rewrite(fs, path, seq, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return "", fmt.Errorf("salvage commit log %s into %s: %w", path, tmp, err)
	}
	aside = path + corruptSuffix
	if err := copyFile(fs, path, aside); err != nil {
		_ = fs.Remove(tmp)
		return "", err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("salvage commit log %s: replace with %s: %w", path, tmp, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return "", fmt.Errorf("salvage commit log %s: sync dir: %w", path, err)
	}
	return aside, nil
}

// copyFile copies src to dst (replacing it) and fsyncs dst.
func copyFile(fs vfs.FS, src, dst string) error {
	in, err := fs.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := fs.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// rewrite writes to out a clean file (header and records, same seq)
// holding the entries replay keeps from the file at path.
func rewrite(fs vfs.FS, path string, seq uint64, out io.Writer) error {
	in, err := fs.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	return rewriteFrom(in, info.Size(), seq, out)
}

func rewriteFrom(in io.ReaderAt, size int64, seq uint64, out io.Writer) error {
	enc := newEncoder()
	enc.reset(seq)
	buf := appendHeader(nil, seq)
	_, err := scan(in, size, seq, func(es []Entry, hs []HistEntry) error {
		buf = enc.appendRecord(buf, es, hs)
		if len(buf) >= windowSize {
			if _, err := out.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = out.Write(buf)
	return err
}
