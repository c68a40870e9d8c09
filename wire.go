package zaris

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

func encode(v any) ([]byte, error) { return msgpack.Marshal(v) }

// decode reads a message with the reflective codec. The bytes are first checked to be well-formed msgpack
// with no array or map claiming more elements than the bytes left can hold. The reflective codec sizes a
// slice by its header before reading the elements, so a five-byte header could otherwise allocate gigabytes.
func decode(data []byte, v any) error {
	if _, err := msgp.Skip(data); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if err := msgpack.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}
