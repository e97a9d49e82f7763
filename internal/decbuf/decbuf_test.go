package decbuf

import (
	"encoding/binary"
	"errors"
	"testing"
)

func fail(what string) error { return errors.New("bad " + what) }

// TestBytesNamesTheFailingField: a cut length names the field's length,
// cut bytes the field; a read after a failure keeps the first error.
func TestBytesNamesTheFailingField(t *testing.T) {
	b := binary.AppendUvarint(nil, 3)
	b = append(b, "abc"...)
	d := Buf{B: b, Fail: fail}
	if got := string(d.Bytes("id")); got != "abc" || d.Err != nil {
		t.Fatalf("Bytes = %q, %v", got, d.Err)
	}
	d = Buf{B: []byte{0x80}, Fail: fail} // a varint cut short
	if d.Bytes("id") != nil || d.Err == nil || d.Err.Error() != "bad id length" {
		t.Fatalf("cut length: %v", d.Err)
	}
	d = Buf{B: []byte{5, 'a'}, Fail: fail}
	if d.Bytes("id") != nil || d.Err == nil || d.Err.Error() != "bad id" {
		t.Fatalf("cut bytes: %v", d.Err)
	}
	d.Bytes("other")
	if d.Err.Error() != "bad id" {
		t.Fatalf("first error not kept: %v", d.Err)
	}
}

// TestBytesDoesNotAllocate: reading a field builds no name (the snapshot
// load reads millions).
func TestBytesDoesNotAllocate(t *testing.T) {
	b := binary.AppendUvarint(nil, 3)
	b = append(b, "abc"...)
	allocs := testing.AllocsPerRun(100, func() {
		d := Buf{B: b, Fail: fail}
		if d.Bytes("a field named at length: over 32 bytes") == nil { // past the runtime's stack buffer for a concatenation
			t.Fatal("no bytes")
		}
	})
	if allocs != 0 {
		t.Fatalf("Bytes allocates %v times a call", allocs)
	}
}
