package zaris

import (
	"context"
	"fmt"
	"strconv"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// maxCollectionArgs bounds the arguments of one collection operation. Their bytes are bounded by
// Config.MaxValueSize, and a reply's by half of Config.MaxFrameSize.
const maxCollectionArgs = 1 << 20

// invalidArgs refuses a collection operation with Redis's error message, which the RESP endpoint replies
// and the Go API wraps in ErrInvalidRequest.
func invalidArgs(msg string) kv.Reply {
	return kv.Reply{Status: StatusInvalidRequest, Value: []byte(msg)}
}

func wrongArgCount(cmd string) kv.Reply {
	return invalidArgs("ERR wrong number of arguments for '" + cmd + "' command")
}

const (
	msgNotInteger = "ERR value is not an integer or out of range"
	msgSyntax     = "ERR syntax error"
	msgOverflow   = "ERR increment or decrement would overflow"
)

// collectionOp wraps the apply function of a collection operation that writes: it refuses arguments
// beyond the limits first.
func collectionOp(apply applyFunc) applyFunc {
	return func(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
		size := 0
		for _, a := range req.Args {
			size += len(a)
		}
		if len(req.Args) > maxCollectionArgs || size > lim.maxValueSize {
			return kv.Reply{Status: StatusTooLarge}
		}
		return apply(s, seg, req, lim)
	}
}

// writeReply answers a collection write: its status and, when it wrote, the key's new version. A reply
// without a version wrote nothing, so it tells the stored state (revealsUnwritten).
func writeReply(version uint64, status Status, n int) kv.Reply {
	return kv.Reply{Status: status, Version: version, Int: int64(n)}
}

// collWrite is what writeCollection did: the key's version after the op (0 if none was applied), and
// whether the op emptied the collection, which deleted the key.
type collWrite struct {
	version uint64
	status  Status
	emptied bool
}

// reply answers a collection write, with n in Int.
func (w collWrite) reply(n int) kv.Reply {
	r := writeReply(w.version, w.status, n)
	r.Emptied = w.emptied
	return r
}

// popCount parses the optional count of a pop: 1 without one. It refuses more arguments, and a negative
// count, as Redis does.
func popCount(args [][]byte, cmd string) (int64, kv.Reply) {
	switch len(args) {
	case 0:
		return 1, kv.Reply{Status: StatusSuccess}
	case 1:
		if count, ok := parseInt(args[0]); ok && count >= 0 {
			return count, kv.Reply{Status: StatusSuccess}
		}
		return 0, invalidArgs("ERR value is out of range, must be positive")
	}
	return 0, wrongArgCount(cmd)
}

// poppedReply answers a pop that removed popped (nil when the key was missing): one item in Value without
// a count among args, all of them in Values with one, and StatusNotFound for a missing key.
func poppedReply(w collWrite, args [][]byte, popped [][]byte) kv.Reply {
	reply := w.reply(0)
	switch {
	case w.status != StatusSuccess:
	case popped == nil:
		reply.Status = StatusNotFound
	case len(args) == 0:
		reply.Value = popped[0]
	default:
		reply.Values = popped
	}
	return reply
}

// readReply answers a collection read with values, or StatusTooLarge when they exceed the reply limit.
func readReply(status Status, values [][]byte, lim opLimits) kv.Reply {
	size := 0
	for _, v := range values {
		size += len(v) + 5
	}
	if size > lim.maxReplyBytes {
		return kv.Reply{Status: StatusTooLarge}
	}
	return kv.Reply{Status: status, Values: values}
}

// parseInt parses an integer argument as Redis does.
func parseInt(b []byte) (int64, bool) { return kv.ParseCanonicalInt(b) }

// collectionCall runs a collection operation on key's owner with args after the key, and turns a refusal
// into an error.
func (c *client) collectionCall(ctx context.Context, op transport.Op, key string, args ...[]byte) (kv.Reply, error) {
	if args == nil {
		args = [][]byte{}
	}
	reply, err := c.execute(ctx, op, &kv.Request{Key: key, Args: args})
	if err != nil {
		return reply, err
	}
	switch reply.Status {
	case StatusSuccess, StatusNotFound:
		return reply, nil
	case StatusInvalidRequest:
		if reply.Value != nil {
			return reply, fmt.Errorf("%w: %s", ErrInvalidRequest, reply.Value)
		}
	case StatusTooLarge:
		return reply, fmt.Errorf("%w: the arguments exceed %d values or %d bytes, or the reply half the frame size",
			ErrValueTooLarge, maxCollectionArgs, c.cfg.MaxValueSize)
	}
	return reply, statusErr(reply.Status)
}

// intArg formats n as an argument.
func intArg(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// stringArgs turns strings into arguments.
func stringArgs(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// stringsOf turns values into strings.
func stringsOf(values [][]byte) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// distinct returns args without repeats, keeping the first of each.
func distinct(args [][]byte) [][]byte {
	if len(args) < 2 {
		return args
	}
	seen := make(map[string]struct{}, len(args))
	out := args[:0:0]
	for _, a := range args {
		if _, dup := seen[string(a)]; !dup {
			seen[string(a)] = struct{}{}
			out = append(out, a)
		}
	}
	return out
}

// Type returns the kind of value key holds: "string", "hash", "set", "list" or "zset", or "none".
func (n *Node) Type(ctx context.Context, key string) (string, error) {
	reply, err := n.client.execute(ctx, kv.OpType, &kv.Request{Key: key})
	if err != nil {
		return "", err
	}
	return string(reply.Value), statusErr(reply.Status)
}
