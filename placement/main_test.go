package placement

import (
	"testing"

	"go.uber.org/goleak"
)

// The store and watch tests start an embedded etcd and watch goroutines;
// all of them must be gone when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
