package client

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: the
// session's host queues, health probes and hint replay loops must all
// stop on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
