package fileset

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ID names one fileset: one volume of one block of one shard of one
// namespace. BlockStart is in unix milliseconds. Volume starts at 0 and grows
// by one for every rewrite of the block (cold writes).
type ID struct {
	Namespace  string
	Shard      uint32
	BlockStart int64
	Volume     int
}

func (id ID) String() string {
	return fmt.Sprintf("%s/%d/%d/v%d", id.Namespace, id.Shard, id.BlockStart, id.Volume)
}

// maxVolume keeps the volume in the uint32 the files store it as.
const maxVolume = 1<<31 - 1

// validate rejects IDs that could escape the root directory or not round
// trip through file names and the on-disk encoding.
func (id ID) validate() error {
	if err := validateNamespace(id.Namespace); err != nil {
		return err
	}
	if id.Volume < 0 || id.Volume > maxVolume {
		return fmt.Errorf("volume %d out of range [0, %d]", id.Volume, maxVolume)
	}
	return nil
}

func validateNamespace(ns string) error {
	switch {
	case ns == "":
		return errors.New("empty namespace")
	case ns == "." || ns == "..":
		return fmt.Errorf("namespace %q is not a valid directory name", ns)
	case len(ns) > 1<<16-1:
		return fmt.Errorf("namespace of %d bytes is too long", len(ns))
	case strings.ContainsAny(ns, "/\\\x00"):
		return fmt.Errorf("namespace %q contains a path separator or NUL", ns)
	}
	return nil
}

// fileKind is one of the five files of a fileset.
type fileKind string

const (
	kindInfo       fileKind = "info"
	kindIndex      fileKind = "index"
	kindData       fileKind = "data"
	kindDigest     fileKind = "digest"
	kindCheckpoint fileKind = "checkpoint"
	// kindPending is the empty marker of a version 2 volume being
	// written or removed, or of a version 1 fileset being removed: the
	// evidence that its files without a valid checkpoint are an
	// interrupted flush or removal, not damage. The writer creates it
	// before the data file and removes it only after the checkpoint and
	// the directory are fsynced; RemoveBlock and Remove create it before
	// deleting the checkpoint and remove it last. Both rely on
	// the directory fsync that follows to make the marker durable no
	// later than the state it vouches for; should a file system persist
	// them out of order, the volume is taken for damage and moved aside,
	// never deleted (docs/format/fileset.md, "Incomplete volumes").
	kindPending fileKind = "pending"
)

// kinds lists the files in write order; the checkpoint is always last.
var kinds = []fileKind{kindData, kindIndex, kindInfo, kindDigest, kindCheckpoint}

const (
	filePrefix = "fileset-"
	fileSuffix = ".db"
)

// NamespaceDir is the directory holding every shard of a namespace.
func NamespaceDir(root, namespace string) string {
	return filepath.Join(root, namespace)
}

// ShardDir is the directory holding every fileset of a shard.
func ShardDir(root, namespace string, shard uint32) string {
	return filepath.Join(root, namespace, strconv.FormatUint(uint64(shard), 10))
}

func fileName(id ID, kind fileKind) string {
	return filePrefix + strconv.FormatInt(id.BlockStart, 10) + "-" +
		strconv.Itoa(id.Volume) + "-" + string(kind) + fileSuffix
}

// FilePath is the path of one file of a fileset; kind is one of "info",
// "index", "data", "digest", "checkpoint". Exposed for tools and tests.
func FilePath(root string, id ID, kind string) string {
	return filepath.Join(ShardDir(root, id.Namespace, id.Shard), fileName(id, fileKind(kind)))
}

func filePath(root string, id ID, kind fileKind) string {
	return FilePath(root, id, string(kind))
}

// parseFileName splits "fileset-<blockStart>-<volume>-<kind>.db". ok is
// false for names that are not fileset files (including temp or foreign
// files), which callers skip.
func parseFileName(name string) (blockStart int64, volume int, kind fileKind, ok bool) {
	if !strings.HasPrefix(name, filePrefix) || !strings.HasSuffix(name, fileSuffix) {
		return 0, 0, "", false
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(name, filePrefix), fileSuffix)
	// rest = <blockStart>-<volume>-<kind>; blockStart may be negative, so
	// split from the right.
	i := strings.LastIndexByte(rest, '-')
	if i < 0 {
		return 0, 0, "", false
	}
	kind = fileKind(rest[i+1:])
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '-')
	if j < 0 {
		return 0, 0, "", false
	}
	bs, err := strconv.ParseInt(rest[:j], 10, 64)
	if err != nil {
		return 0, 0, "", false
	}
	vol, err := strconv.ParseUint(rest[j+1:], 10, 31)
	if err != nil {
		return 0, 0, "", false
	}
	switch kind {
	case kindInfo, kindIndex, kindData, kindDigest, kindCheckpoint, kindPending:
	default:
		return 0, 0, "", false
	}
	// Reject non-canonical spellings ("+5", "007") so one fileset has one
	// set of names.
	if strconv.FormatInt(bs, 10) != rest[:j] || strconv.FormatUint(vol, 10) != rest[j+1:] {
		return 0, 0, "", false
	}
	return bs, int(vol), kind, true
}
