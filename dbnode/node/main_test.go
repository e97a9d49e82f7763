package node

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a
// node's etcd, servers, session and background loops must all stop when
// it does.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
