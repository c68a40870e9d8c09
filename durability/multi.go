package durability

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// minOpSize is the fewest bytes an encoded op takes. It bounds the count a multi op's header may claim
// before anything is allocated.
const minOpSize = 1 + opFields

// AppendMulti appends ops to dst as the Value of an OpMulti: a msgpack array of ops encoded by AppendOp.
// The ops must not be multi ops themselves.
func AppendMulti(dst []byte, ops []Op) []byte {
	dst = msgp.AppendArrayHeader(dst, uint32(len(ops)))
	for i := range ops {
		dst = AppendOp(dst, &ops[i])
	}
	return dst
}

// DecodeMulti decodes what AppendMulti wrote, which must fill all of b: at least one op, none of them a
// multi op. Keys and values are copies. Malformed input returns an error wrapping ErrCorrupt.
func DecodeMulti(b []byte) ([]Op, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, corrupt("multi header", err)
	}
	if n == 0 || uint64(n) > uint64(len(b)/minOpSize) {
		return nil, corrupt(fmt.Sprintf("%d ops claimed in %d bytes", n, len(b)), nil)
	}
	ops := make([]Op, n)
	for i := range ops {
		if ops[i], b, err = DecodeOp(b); err != nil {
			return nil, err
		}
		if ops[i].Kind == OpMulti {
			return nil, corrupt("multi op inside a multi op", nil)
		}
	}
	if len(b) != 0 {
		return nil, corrupt(fmt.Sprintf("%d bytes after the ops", len(b)), nil)
	}
	return ops, nil
}
