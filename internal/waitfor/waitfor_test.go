package waitfor

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConditionReturnsOnceTrue(t *testing.T) {
	n := 0
	Condition(t, 5*time.Second, time.Millisecond, "third call", func() error {
		n++
		if n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	require.Equal(t, 3, n)
}

// fatalRecorder records Fatalf without stopping the test goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper()                           {}
func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = format }

func TestConditionFailsAtDeadline(t *testing.T) {
	f := &fatalRecorder{TB: t}
	Condition(f, 20*time.Millisecond, time.Millisecond, "never", func() error { return errors.New("no") })
	require.Contains(t, f.msg, "timed out")
}
