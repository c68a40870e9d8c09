package zaris

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/zaris-go/zaris/transport"
)

// Data-plane operations. The numbers are part of the wire format: append, never renumber.
const (
	opGet transport.Op = iota + 1
	opPut
	opDelete
	opGetMap
)

var opNames = map[transport.Op]string{opGet: "get", opPut: "put", opDelete: "delete", opGetMap: "getmap"}

// kvRequest is a single-key operation. The receiver derives the segment from Key itself and never trusts
// the sender's placement.
type kvRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	Key      string
	Value    []byte
	TTL      int64 // nanoseconds; 0 = no expiry
}

// kvReply answers a kvRequest. For Moved-like statuses, Owner, Epoch and MapIndex describe the receiver's
// view so the sender can tell whether its own map is older.
type kvReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status
	Value    []byte
	Version  uint64
	Owner    NodeID
	Epoch    uint64
	MapIndex uint64
}

func encode(v any) ([]byte, error) { return msgpack.Marshal(v) }

func decode(data []byte, v any) error {
	if err := msgpack.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}
