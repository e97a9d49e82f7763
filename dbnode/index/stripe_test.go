package index

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The stripe's table is slots.Table, tested against a Go map there.

func TestStripeIsOneCacheLine(t *testing.T) {
	require.Equal(t, uintptr(64), unsafe.Sizeof(stripe{}))
}
