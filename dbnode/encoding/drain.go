package encoding

import "fmt"

// Encode drains it into a fresh stream and returns the stream and its sample
// count. It fails if it reports an error or yields timestamps that do not
// increase.
func Encode(it Iterator) ([]byte, int, error) {
	e := NewEncoder()
	for it.Next() {
		t, v := it.At()
		if err := e.Append(t, v); err != nil {
			return nil, 0, fmt.Errorf("encode sample %d at %d: %w", e.Len(), t, err)
		}
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("encode after %d samples: %w", e.Len(), err)
	}
	return e.Bytes(), e.Len(), nil
}
