package resp

import (
	"strings"

	"github.com/zaris-go/zaris/internal/kv"
)

// memorySubcommandArity is the arity of each MEMORY subcommand served.
var memorySubcommandArity = map[string]int{"usage": -3, "help": 2}

var memoryHelp = []string{
	"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value. The node counts every element of a collection,",
	"    so SAMPLES is read and checked, and changes nothing.",
	"HELP",
	"    Print this help.",
}

// cmdMemory serves MEMORY USAGE, the bytes a key and its value take as its owner counts them against the
// memory bound, and MEMORY HELP. As in Redis, USAGE's options are checked before the key is looked up.
func (c *respConn) cmdMemory(args [][]byte) {
	switch sub := strings.ToLower(clip(args[1], 16)); {
	case sub == "help":
		c.wr.array(len(memoryHelp))
		for _, line := range memoryHelp {
			c.wr.simple(line)
		}
	case sub == "usage":
		if !c.memoryUsageOptions(args[3:]) {
			return
		}
		reply, ok := c.keyOp(kv.OpObject, &kv.Request{Key: string(args[2]), Args: [][]byte{[]byte("memory")}})
		switch {
		case !ok:
		case reply.Status == kv.StatusNotFound:
			c.wr.null()
		default:
			c.wr.int(reply.Int)
		}
	default:
		c.unknownSubcommand("memory", args[1])
	}
}

// memoryUsageOptions checks MEMORY USAGE's SAMPLES option as Redis does, answering a bad one.
func (c *respConn) memoryUsageOptions(opts [][]byte) bool {
	for i := 0; i < len(opts); i++ {
		if !isSubcommand(opts[i], "SAMPLES") || i+1 == len(opts) {
			c.syntaxError()
			return false
		}
		i++
		n, ok := kv.ParseCanonicalInt(opts[i])
		switch {
		case !ok:
			c.notInteger()
			return false
		case n < 0:
			c.syntaxError()
			return false
		}
	}
	return true
}
