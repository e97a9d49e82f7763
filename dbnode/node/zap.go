package node

import "go.uber.org/zap"

// zapNop keeps the etcd client quiet; its retries are logged by the node.
func zapNop() *zap.Logger { return zap.NewNop() }
