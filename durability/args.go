package durability

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// minArgSize is the fewest bytes an encoded argument takes (an empty bin). It bounds the count a header may
// claim before anything is allocated.
const minArgSize = 2

// ArgsSize is the encoded size of args.
func ArgsSize(args [][]byte) int {
	n := msgp.ArrayHeaderSize
	for _, a := range args {
		n += msgp.BytesPrefixSize + len(a)
	}
	return n
}

// AppendArgs appends args to dst as a msgpack array of bin: the arguments of a collection op, or the
// elements of a collection in a snapshot.
func AppendArgs(dst []byte, args [][]byte) []byte {
	dst = msgp.Require(dst, ArgsSize(args))
	dst = msgp.AppendArrayHeader(dst, uint32(len(args)))
	for _, a := range args {
		dst = msgp.AppendBytes(dst, a)
	}
	return dst
}

// DecodeArgs decodes what AppendArgs wrote, which must fill all of b. The arguments alias b. Malformed input
// returns an error wrapping ErrCorrupt.
func DecodeArgs(b []byte) ([][]byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, corrupt("args header", err)
	}
	if uint64(n) > uint64(len(b)/minArgSize) {
		return nil, corrupt(fmt.Sprintf("%d args claimed in %d bytes", n, len(b)), nil)
	}
	args := make([][]byte, n)
	for i := range args {
		if args[i], b, err = msgp.ReadBytesZC(b); err != nil {
			return nil, corrupt(fmt.Sprintf("arg %d", i), err)
		}
		args[i] = args[i][:len(args[i]):len(args[i])]
	}
	if len(b) != 0 {
		return nil, corrupt(fmt.Sprintf("%d bytes after the args", len(b)), nil)
	}
	return args, nil
}
