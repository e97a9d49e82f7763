package backup

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/go-kit/log"
	"github.com/thanos-io/objstore"
	"github.com/thanos-io/objstore/providers/azure"
	"github.com/thanos-io/objstore/providers/filesystem"
	"github.com/thanos-io/objstore/providers/gcs"
	"github.com/thanos-io/objstore/providers/s3"
	"github.com/thanos-io/objstore/providers/swift"
	"gopkg.in/yaml.v3"
)

// BucketConfig is objstore's bucket configuration file, the one Thanos,
// Cortex and Mimir users already write:
//
//	type: S3            # or FILESYSTEM
//	config: {...}       # the provider's own fields
//	prefix: tessera     # optional: every key goes under it
type BucketConfig struct {
	Type   string    `yaml:"type"`
	Config yaml.Node `yaml:"config"`
	Prefix string    `yaml:"prefix"`
}

// NewBucket opens the bucket a configuration file describes, through
// objstore's providers. The YAML may hold secrets: callers must not log
// it. FILESYSTEM, S3 (which covers MinIO, Ceph, versitygw and every
// S3-compatible store), GCS, AZURE and SWIFT are built in, with objstore's
// own providers and config fields; its full client factory would also
// link the SDKs of five more clouds (a 72 MB probe binary on its own).
func NewBucket(conf []byte) (objstore.Bucket, error) {
	var bc BucketConfig
	dec := yaml.NewDecoder(bytes.NewReader(conf))
	dec.KnownFields(true)
	if err := dec.Decode(&bc); err != nil {
		return nil, fmt.Errorf("bucket config: %w", err)
	}
	var inner []byte
	if !bc.Config.IsZero() {
		var err error
		if inner, err = yaml.Marshal(&bc.Config); err != nil {
			return nil, fmt.Errorf("bucket config: config: %w", err)
		}
	}
	var (
		b   objstore.Bucket
		err error
	)
	switch strings.ToUpper(bc.Type) {
	case string(objstore.FILESYSTEM):
		b, err = filesystem.NewBucketFromConfig(inner)
	case string(objstore.S3):
		b, err = s3.NewBucket(log.NewNopLogger(), inner, "tessera-backup", nil)
	case string(objstore.GCS):
		b, err = gcs.NewBucket(context.Background(), log.NewNopLogger(), inner, "tessera-backup", nil)
	case string(objstore.AZURE):
		b, err = azure.NewBucket(log.NewNopLogger(), inner, "tessera-backup", nil)
	case string(objstore.SWIFT):
		b, err = swift.NewContainer(log.NewNopLogger(), inner, nil)
	case "":
		return nil, fmt.Errorf("bucket config: type is missing (want %s)", builtIn)
	default:
		return nil, fmt.Errorf("bucket config: type %q is not built in (want %s)", bc.Type, builtIn)
	}
	if err != nil {
		return nil, fmt.Errorf("bucket config: %s: %w", strings.ToUpper(bc.Type), err)
	}
	if bc.Prefix != "" {
		b = objstore.NewPrefixedBucket(b, bc.Prefix)
	}
	return b, nil
}

const builtIn = "FILESYSTEM, S3, GCS, AZURE or SWIFT"
