package resp

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zaris-go/zaris/internal/glob"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// respVersion is the Redis version the endpoint reports. Clients use it to pick the features they rely on.
const respVersion = "7.0.0"

// respCommand describes one command the endpoint serves, with the key positions COMMAND reports so that
// cluster clients can route it (first key, last key, step; a negative last key counts from the end).
type respCommand struct {
	name     string
	arity    int // Redis convention: n means exactly n arguments (name included), -n at least n
	flags    []string
	firstKey int
	lastKey  int
	step     int
	// keysAt finds the keys of a command whose key count is an argument (SINTERCARD numkeys key ...): nil
	// for arguments that do not name them right. Such a command reports no fixed key positions.
	keysAt   func(args [][]byte) [][]byte
	acl      []string
	noAuth   bool           // may run before AUTH
	parent   bool           // has subcommands, which permissions name as parent|sub
	subArity map[string]int // the arity of each subcommand, checked before the command runs or queues
	run      func(c *respConn, args [][]byte)

	// controlsMulti: runs at once inside MULTI instead of being queued (MULTI, EXEC, DISCARD, WATCH, QUIT).
	controlsMulti bool
	// grouped: runs in one group of its slot's segment even on one key, as a command composed of several key
	// operations must (composite.go); a command on several keys always does.
	grouped bool
	// noMulti: refused inside MULTI, because it logs in or switches the protocol, or reads across the store,
	// which an EXEC holding its segment's lock cannot do.
	noMulti bool
	// blocks: may wait for a write of its keys (blocking.go), so it takes its segment's group itself,
	// between waits.
	blocks bool
	// everyKey: writes every key of the node, so only a user allowed every key may run it.
	everyKey bool
	// channels: the pub/sub channels the command names, which a user's channel patterns must allow: n
	// means arguments 1 to n, -1 every argument from the first. channelPatterns: they are patterns.
	channels        int
	channelPatterns bool
}

func (cmd *respCommand) hasFlag(flag string) bool { return slices.Contains(cmd.flags, flag) }

// CommandSpec describes a command as COMMAND INFO does, with how it runs its keys' operations.
type CommandSpec struct {
	Flags         []string
	FirstKey      int  // 0: it takes no key at a fixed position
	MovableKeys   bool // its keys follow a count among its arguments
	Grouped       bool // runs its keys' operations in one atomic group, even on one key
	ControlsMulti bool // runs at once inside MULTI instead of being queued
}

// Commands describes every command the endpoint serves, by lower-case name.
func Commands() map[string]CommandSpec {
	out := make(map[string]CommandSpec, len(respCommandTable))
	for name, cmd := range respCommandTable {
		out[name] = CommandSpec{Flags: slices.Clone(cmd.flags), FirstKey: cmd.firstKey, MovableKeys: cmd.keysAt != nil, Grouped: cmd.grouped || cmd.blocks,
			ControlsMulti: cmd.controlsMulti}
	}
	return out
}

// fullName names the command as ACL errors do: "config|get" for a subcommand.
func (cmd *respCommand) fullName(args [][]byte) string {
	if cmd.parent && len(args) > 1 {
		return cmd.name + "|" + strings.ToLower(clip(args[1], 64))
	}
	return cmd.name
}

// keys returns the key arguments of a command that has some.
func (cmd *respCommand) keys(args [][]byte) [][]byte {
	if cmd.keysAt != nil {
		return cmd.keysAt(args)
	}
	if cmd.firstKey == 0 {
		return nil
	}
	last := cmd.lastKey
	if last < 0 {
		last += len(args)
	}
	var out [][]byte
	for i := cmd.firstKey; i <= last && i < len(args); i += cmd.step {
		out = append(out, args[i])
	}
	return out
}

// wholeSteps reports whether the arguments after the first key come in whole steps, as MSET's key and
// value pairs must: otherwise the command refuses them before it looks at a key.
func (cmd *respCommand) wholeSteps(args [][]byte) bool {
	return cmd.keysAt != nil || cmd.lastKey >= 0 || (len(args)-cmd.firstKey)%cmd.step == 0
}

// takesKeys reports whether the command names keys, at fixed positions or by a count.
func (cmd *respCommand) takesKeys() bool { return cmd.firstKey != 0 || cmd.keysAt != nil }

// keysAfterCount finds the keys that follow a count at args[at], as SINTERCARD numkeys key [key ...] has
// them: none when the count is not a positive integer within the arguments.
func keysAfterCount(at int) func(args [][]byte) [][]byte {
	return func(args [][]byte) [][]byte {
		if at >= len(args) {
			return nil
		}
		n, ok := kv.ParseCanonicalInt(args[at])
		if !ok || n < 1 || n > int64(len(args)-at-1) {
			return nil
		}
		return args[at+1 : at+1+int(n)]
	}
}

// storeAndKeysAfterCount finds the keys of ZUNIONSTORE destination numkeys key [key ...]: the destination
// and the keys its count names.
func storeAndKeysAfterCount(args [][]byte) [][]byte {
	keys := keysAfterCount(2)(args)
	if keys == nil {
		return nil
	}
	return append([][]byte{args[1]}, keys...)
}

func (cmd *respCommand) arityOK(n int) bool {
	if cmd.arity >= 0 {
		return n == cmd.arity
	}
	return n >= -cmd.arity
}

// respCommandTable is every command the endpoint serves, by lower-case name.
var respCommandTable = buildRESPCommands()

func buildRESPCommands() map[string]*respCommand {
	readFast := []string{"readonly", "fast"}
	write := []string{"write", "denyoom"}
	writeFast := []string{"write", "denyoom", "fast"}
	meta := []string{"loading", "stale", "fast"}
	txnFlags := []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	txnFast := []string{"@fast", "@transaction"}
	list := []*respCommand{
		{name: "get", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@string", "@fast"}, run: (*respConn).cmdGet},
		{name: "set", arity: -3, flags: write, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@slow"}, run: (*respConn).cmdSet},
		{name: "del", arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@keyspace", "@write", "@slow"}, run: (*respConn).cmdDel},
		{name: "unlink", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@keyspace", "@write", "@fast"}, run: (*respConn).cmdDel},
		{name: "exists", arity: -2, flags: readFast, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdExists},
		{name: "mget", arity: -2, flags: readFast, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@read", "@string", "@fast"}, run: (*respConn).cmdMGet},
		{name: "mset", arity: -3, flags: write, firstKey: 1, lastKey: -1, step: 2, acl: []string{"@write", "@string", "@slow"}, run: (*respConn).cmdMSet},
		{name: "incr", arity: 2, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdIncr},
		{name: "decr", arity: 2, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdIncr},
		{name: "incrby", arity: 3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdIncr},
		{name: "decrby", arity: 3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdIncr},
		{name: "incrbyfloat", arity: 3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdIncrByFloat},
		{name: "append", arity: 3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdAppend},
		{name: "getdel", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdGetDel},
		{name: "getex", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdGetEx},
		{name: "setbit", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@bitmap", "@slow"}, grouped: true, run: (*respConn).cmdSetBit},
		{name: "getbit", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@bitmap", "@fast"}, run: (*respConn).cmdGetBit},
		{name: "bitcount", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@bitmap", "@slow"}, run: (*respConn).cmdBitCount},
		{name: "setrange", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@slow"}, run: (*respConn).cmdSetRange},
		{name: "lcs", arity: -3, flags: []string{"readonly"}, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@read", "@string", "@slow"}, grouped: true, run: (*respConn).cmdLCS},
		{name: "getrange", arity: 4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@string", "@slow"}, run: (*respConn).cmdGetRange},
		{name: "strlen", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@string", "@fast"}, run: (*respConn).cmdStrlen},
		{parent: true, name: "memory", subArity: memorySubcommandArity, arity: -2, flags: []string{"readonly"}, firstKey: 2, lastKey: 2, step: 1, acl: []string{"@read", "@slow"}, run: (*respConn).cmdMemory},
		{parent: true, name: "object", subArity: objectSubcommandArity, arity: -2, flags: []string{"readonly"}, firstKey: 2, lastKey: 2, step: 1, acl: []string{"@keyspace", "@read", "@slow"}, run: (*respConn).cmdObject},
		{name: "type", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdType},
		{name: "expire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@write", "@fast"}, run: (*respConn).cmdExpire},
		{name: "pexpire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@write", "@fast"}, run: (*respConn).cmdExpire},
		{name: "expireat", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@write", "@fast"}, run: (*respConn).cmdExpire},
		{name: "pexpireat", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@write", "@fast"}, run: (*respConn).cmdExpire},
		{name: "touch", arity: -2, flags: readFast, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdExists},
		{name: "ttl", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdTTL},
		{name: "pttl", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdTTL},
		{name: "expiretime", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdTTL},
		{name: "pexpiretime", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdTTL},
		{name: "rename", arity: 3, flags: []string{"write"}, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@keyspace", "@write", "@slow"}, grouped: true, run: (*respConn).cmdRename},
		{name: "renamenx", arity: 3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@keyspace", "@write", "@fast"}, grouped: true, run: (*respConn).cmdRename},
		{name: "copy", arity: -3, flags: write, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@keyspace", "@write", "@slow"}, grouped: true, run: (*respConn).cmdCopy},
		{name: "lpos", arity: -3, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLPos},
		{name: "sintercard", arity: -3, flags: []string{"readonly", "movablekeys"}, keysAt: keysAfterCount(1), acl: []string{"@read", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSInterCard},
		{name: "lset", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLSet},
		{name: "linsert", arity: 5, flags: write, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLInsert},
		{name: "lrem", arity: 4, flags: []string{"write"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLRem},
		{name: "hscan", arity: -3, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@slow"}, run: (*respConn).cmdHScan},
		{name: "sscan", arity: -3, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@set", "@slow"}, run: (*respConn).cmdSScan},
		{name: "zscan", arity: -3, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: (*respConn).cmdZScan},
		{name: "zrandmember", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: (*respConn).cmdZRandMember},
		{name: "hrandfield", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@slow"}, run: (*respConn).cmdHRandField},
		{name: "persist", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@keyspace", "@write", "@fast"}, run: (*respConn).cmdPersist},
		{name: "setnx", arity: 3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdSetNX},
		{name: "setex", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@slow"}, run: (*respConn).cmdSetEx},
		{name: "psetex", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@slow"}, run: (*respConn).cmdSetEx},
		{name: "getset", arity: 3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@string", "@fast"}, run: (*respConn).cmdGetSet},
		{name: "hmset", arity: -4, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@hash", "@fast"}, run: (*respConn).cmdHMSet},
		{name: "hkeys", arity: 2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@slow"}, run: collectionCommand(kv.OpHGetAll, fieldsReply)},
		{name: "hvals", arity: 2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@slow"}, run: collectionCommand(kv.OpHGetAll, hashValuesReply)},
		{name: "hstrlen", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, run: collectionCommand(kv.OpHGet, lengthReply)},
		{name: "smismember", arity: -3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@set", "@fast"}, grouped: true, run: (*respConn).cmdSMIsMember},
		{name: "zmscore", arity: -3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@fast"}, grouped: true, run: (*respConn).cmdZMScore},
		{name: "hsetnx", arity: 4, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@hash", "@fast"}, grouped: true, run: (*respConn).cmdHSetNX},
		{name: "zrevrank", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@fast"}, grouped: true, run: (*respConn).cmdZRevRank},
		{name: "zpopmin", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@sortedset", "@fast"}, grouped: true, run: (*respConn).cmdZPop},
		{name: "zpopmax", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@sortedset", "@fast"}, grouped: true, run: (*respConn).cmdZPop},
		{name: "smove", arity: 4, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@write", "@set", "@fast"}, grouped: true, run: (*respConn).cmdSMove},
		{name: "rpoplpush", arity: 3, flags: write, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@write", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLMove},
		{name: "blpop", blocks: true, arity: -3, flags: []string{"write", "noscript", "blocking"}, firstKey: 1, lastKey: -2, step: 1, acl: []string{"@write", "@list", "@slow", "@blocking"}, run: (*respConn).cmdBPop},
		{name: "brpop", blocks: true, arity: -3, flags: []string{"write", "noscript", "blocking"}, firstKey: 1, lastKey: -2, step: 1, acl: []string{"@write", "@list", "@slow", "@blocking"}, run: (*respConn).cmdBPop},
		{name: "blmove", blocks: true, arity: 6, flags: []string{"write", "denyoom", "noscript", "blocking"}, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@write", "@list", "@slow", "@blocking"}, run: (*respConn).cmdBLMove},
		{name: "brpoplpush", blocks: true, arity: 4, flags: []string{"write", "denyoom", "noscript", "blocking"}, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@write", "@list", "@slow", "@blocking"}, run: (*respConn).cmdBLMove},
		{name: "blmpop", blocks: true, arity: -5, flags: []string{"write", "blocking", "movablekeys"}, keysAt: keysAfterCount(2), acl: []string{"@write", "@list", "@slow", "@blocking"}, run: (*respConn).cmdBLMPop},
		{name: "lmpop", arity: -4, flags: []string{"write", "movablekeys"}, keysAt: keysAfterCount(1), acl: []string{"@write", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLMPop},
		{name: "zmpop", arity: -4, flags: []string{"write", "movablekeys"}, keysAt: keysAfterCount(1), acl: []string{"@write", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZMPop},
		{name: "bzmpop", blocks: true, arity: -5, flags: []string{"write", "blocking", "movablekeys"}, keysAt: keysAfterCount(2), acl: []string{"@write", "@sortedset", "@slow", "@blocking"}, run: (*respConn).cmdBZMPop},
		{name: "bzpopmin", blocks: true, arity: -3, flags: []string{"write", "noscript", "blocking", "fast"}, firstKey: 1, lastKey: -2, step: 1, acl: []string{"@write", "@sortedset", "@fast", "@blocking"}, run: (*respConn).cmdBZPop},
		{name: "bzpopmax", blocks: true, arity: -3, flags: []string{"write", "noscript", "blocking", "fast"}, firstKey: 1, lastKey: -2, step: 1, acl: []string{"@write", "@sortedset", "@fast", "@blocking"}, run: (*respConn).cmdBZPop},
		{name: "zunion", arity: -3, flags: []string{"readonly", "movablekeys"}, keysAt: keysAfterCount(1), acl: []string{"@read", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZUnion},
		{name: "zinter", arity: -3, flags: []string{"readonly", "movablekeys"}, keysAt: keysAfterCount(1), acl: []string{"@read", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZInter},
		{name: "zdiff", arity: -3, flags: []string{"readonly", "movablekeys"}, keysAt: keysAfterCount(1), acl: []string{"@read", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZDiff},
		{name: "zintercard", arity: -3, flags: []string{"readonly", "movablekeys"}, keysAt: keysAfterCount(1), acl: []string{"@read", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZInterCard},
		{name: "zrangestore", arity: -5, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@write", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZRangeStore},
		{name: "zunionstore", arity: -4, flags: []string{"write", "denyoom", "movablekeys"}, firstKey: 1, lastKey: 1, step: 1, keysAt: storeAndKeysAfterCount, acl: []string{"@write", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZUnionStore},
		{name: "zinterstore", arity: -4, flags: []string{"write", "denyoom", "movablekeys"}, firstKey: 1, lastKey: 1, step: 1, keysAt: storeAndKeysAfterCount, acl: []string{"@write", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZInterStore},
		{name: "zdiffstore", arity: -4, flags: []string{"write", "denyoom", "movablekeys"}, firstKey: 1, lastKey: 1, step: 1, keysAt: storeAndKeysAfterCount, acl: []string{"@write", "@sortedset", "@slow"}, grouped: true, run: (*respConn).cmdZDiffStore},
		{name: "lmove", arity: 5, flags: write, firstKey: 1, lastKey: 2, step: 1, acl: []string{"@write", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLMove},
		{name: "msetnx", arity: -3, flags: write, firstKey: 1, lastKey: -1, step: 2, acl: []string{"@write", "@string", "@slow"}, grouped: true, run: (*respConn).cmdMSetNX},
		{name: "sinter", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@read", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSetAlgebra},
		{name: "sunion", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@read", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSetAlgebra},
		{name: "sdiff", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@read", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSetAlgebra},
		{name: "sinterstore", arity: -3, flags: write, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@write", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSetAlgebraStore},
		{name: "sunionstore", arity: -3, flags: write, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@write", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSetAlgebraStore},
		{name: "sdiffstore", arity: -3, flags: write, firstKey: 1, lastKey: -1, step: 1, acl: []string{"@write", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSetAlgebraStore},
		{name: "hincrbyfloat", arity: 4, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@hash", "@fast"}, grouped: true, run: (*respConn).cmdHIncrByFloat},
		{name: "zcount", arity: 4, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@fast"}, grouped: true, run: (*respConn).cmdZCount},
		{name: "srandmember", arity: -2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@set", "@slow"}, grouped: true, run: (*respConn).cmdSRandMember},
		{name: "spop", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@set", "@fast"}, grouped: true, run: (*respConn).cmdSPop},
		{name: "hset", arity: -4, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@hash", "@fast"}, run: collectionCommand(kv.OpHSet, intReply)},
		{name: "hget", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, run: collectionCommand(kv.OpHGet, bulkReply)},
		{name: "hmget", arity: -3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, run: collectionCommand(kv.OpHMGet, arrayReply)},
		{name: "hdel", arity: -3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@hash", "@fast"}, run: collectionCommand(kv.OpHDel, intReply)},
		{name: "hgetall", arity: 2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@slow"}, run: collectionCommand(kv.OpHGetAll, pairsReply)},
		{name: "hlen", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, run: collectionCommand(kv.OpHLen, intReply)},
		{name: "hincrby", arity: 4, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@hash", "@fast"}, run: collectionCommand(kv.OpHIncrBy, intReply)},
		{name: "hexists", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@hash", "@fast"}, run: collectionCommand(kv.OpHExists, intReply)},
		{name: "sadd", arity: -3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@set", "@fast"}, run: collectionCommand(kv.OpSAdd, intReply)},
		{name: "srem", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@set", "@fast"}, run: collectionCommand(kv.OpSRem, intReply)},
		{name: "smembers", arity: 2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@set", "@slow"}, run: collectionCommand(kv.OpSMembers, setReply)},
		{name: "sismember", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@set", "@fast"}, run: collectionCommand(kv.OpSIsMember, intReply)},
		{name: "scard", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@set", "@fast"}, run: collectionCommand(kv.OpSCard, intReply)},
		{name: "lpush", arity: -3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@fast"}, run: collectionCommand(kv.OpLPush, intReply)},
		{name: "rpush", arity: -3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@fast"}, run: collectionCommand(kv.OpRPush, intReply)},
		{name: "lpushx", arity: -3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@fast"}, run: (*respConn).cmdPushX},
		{name: "rpushx", arity: -3, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@fast"}, run: (*respConn).cmdPushX},
		{name: "lpop", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@fast"}, run: collectionCommand(kv.OpLPop, popReply)},
		{name: "rpop", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@fast"}, run: collectionCommand(kv.OpRPop, popReply)},
		{name: "lrange", arity: 4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@list", "@slow"}, run: collectionCommand(kv.OpLRange, arrayReply)},
		{name: "llen", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@list", "@fast"}, run: collectionCommand(kv.OpLLen, intReply)},
		{name: "lindex", arity: 3, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@list", "@slow"}, run: collectionCommand(kv.OpLIndex, bulkReply)},
		{name: "ltrim", arity: 4, flags: []string{"write"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@list", "@slow"}, grouped: true, run: (*respConn).cmdLTrim},
		{name: "zadd", arity: -4, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@sortedset", "@fast"}, run: collectionCommand(kv.OpZAdd, zaddReply)},
		{name: "zrem", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@sortedset", "@fast"}, run: collectionCommand(kv.OpZRem, intReply)},
		{name: "zscore", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@fast"}, run: collectionCommand(kv.OpZScore, scoreReply)},
		{name: "zrevrange", arity: -4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: zrangeForm("REV")},
		{name: "zrangebyscore", arity: -4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: zrangeForm("BYSCORE")},
		{name: "zrangebylex", arity: -4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: zrangeForm("BYLEX")},
		{name: "zrevrangebylex", arity: -4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: zrangeForm("BYLEX", "REV")},
		{name: "zlexcount", arity: 4, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@fast"}, grouped: true, run: (*respConn).cmdZLexCount},
		{name: "zrevrangebyscore", arity: -4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: zrangeForm("BYSCORE", "REV")},
		{name: "zrange", arity: -4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@slow"}, run: collectionCommand(kv.OpZRange, zrangeReply)},
		{name: "zrank", arity: 3, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@fast"}, run: collectionCommand(kv.OpZRank, rankReply)},
		{name: "zcard", arity: 2, flags: readFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@read", "@sortedset", "@fast"}, run: collectionCommand(kv.OpZCard, intReply)},
		{name: "zincrby", arity: 4, flags: writeFast, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@write", "@sortedset", "@fast"}, run: collectionCommand(kv.OpZIncrBy, scoreReply)},
		{name: "scan", noMulti: true, arity: -2, flags: []string{"readonly"}, acl: []string{"@keyspace", "@read", "@slow"}, run: (*respConn).cmdScan},
		{name: "flushall", everyKey: true, noMulti: true, arity: -1, flags: []string{"write"}, acl: []string{"@keyspace", "@write", "@slow", "@dangerous"}, run: (*respConn).cmdFlush},
		{name: "flushdb", everyKey: true, noMulti: true, arity: -1, flags: []string{"write"}, acl: []string{"@keyspace", "@write", "@slow", "@dangerous"}, run: (*respConn).cmdFlush},
		{name: "keys", noMulti: true, arity: 2, flags: []string{"readonly"}, acl: []string{"@keyspace", "@read", "@slow", "@dangerous"}, run: (*respConn).cmdKeys},
		{name: "randomkey", noMulti: true, arity: 1, flags: []string{"readonly"}, acl: []string{"@keyspace", "@read", "@slow"}, run: (*respConn).cmdRandomKey},
		{name: "dbsize", noMulti: true, arity: 1, flags: readFast, acl: []string{"@keyspace", "@read", "@fast"}, run: (*respConn).cmdDBSize},
		{name: "time", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast"}, run: (*respConn).cmdTime},
		{name: "ping", arity: -1, flags: []string{"fast"}, acl: []string{"@fast", "@connection"}, run: (*respConn).cmdPing},
		{name: "publish", arity: 3, flags: []string{"pubsub", "loading", "stale", "fast"}, acl: []string{"@pubsub", "@fast"}, channels: 1, run: (*respConn).cmdPublish},
		{name: "spublish", arity: 3, flags: []string{"pubsub", "loading", "stale", "fast"}, firstKey: 1, lastKey: 1, step: 1, acl: []string{"@pubsub", "@fast"}, channels: 1, run: (*respConn).cmdSPublish},
		{name: "subscribe", noMulti: true, arity: -2, flags: pubsubFlags, acl: []string{"@pubsub", "@slow"}, channels: -1, run: (*respConn).cmdSubscribe},
		{name: "psubscribe", noMulti: true, arity: -2, flags: pubsubFlags, acl: []string{"@pubsub", "@slow"}, channels: -1, channelPatterns: true, run: (*respConn).cmdPSubscribe},
		{name: "ssubscribe", noMulti: true, arity: -2, flags: pubsubFlags, acl: []string{"@pubsub", "@slow"}, channels: -1, run: (*respConn).cmdSSubscribe},
		{name: "unsubscribe", noMulti: true, arity: -1, flags: pubsubFlags, acl: []string{"@pubsub", "@slow"}, run: (*respConn).cmdUnsubscribe},
		{name: "punsubscribe", noMulti: true, arity: -1, flags: pubsubFlags, acl: []string{"@pubsub", "@slow"}, run: (*respConn).cmdPUnsubscribe},
		{name: "sunsubscribe", noMulti: true, arity: -1, flags: pubsubFlags, acl: []string{"@pubsub", "@slow"}, run: (*respConn).cmdSUnsubscribe},
		{parent: true, name: "pubsub", subArity: pubsubSubcommandArity, arity: -2, flags: []string{"pubsub", "loading", "stale"}, acl: []string{"@pubsub", "@slow"}, run: (*respConn).cmdPubsub},
		{name: "echo", arity: 2, flags: []string{"fast"}, acl: []string{"@fast", "@connection"}, run: (*respConn).cmdEcho},
		{name: "hello", noMulti: true, arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, acl: []string{"@fast", "@connection"}, noAuth: true, run: (*respConn).cmdHello},
		{name: "auth", noMulti: true, arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, acl: []string{"@fast", "@connection"}, noAuth: true, run: (*respConn).cmdAuth},
		{name: "wait", arity: 3, flags: []string{"noscript"}, acl: []string{"@slow", "@connection"}, run: (*respConn).cmdWait},
		{name: "reset", controlsMulti: true, arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"}, noAuth: true, run: (*respConn).cmdReset},
		{name: "quit", controlsMulti: true, arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, acl: []string{"@fast", "@connection"}, noAuth: true, run: (*respConn).cmdQuit},
		{parent: true, name: "client", subArity: clientSubcommandArity, arity: -2, flags: []string{"noscript", "loading", "stale"}, acl: []string{"@slow", "@connection"}, run: (*respConn).cmdClient},
		{parent: true, name: "command", arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"}, run: (*respConn).cmdCommand},
		{parent: true, name: "config", subArity: configSubcommandArity, arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"}, run: (*respConn).cmdConfig},
		{name: "backup", noMulti: true, arity: -3, flags: []string{"admin", "noscript"}, acl: []string{"@admin", "@slow", "@dangerous"}, run: (*respConn).cmdBackup},
		{name: "recover", noMulti: true, arity: 1, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"}, run: (*respConn).cmdRecover},
		{name: "info", noMulti: true, arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@dangerous"}, run: (*respConn).cmdInfo},
		{parent: true, name: "cluster", arity: -2, flags: []string{"loading", "stale"}, acl: []string{"@slow"}, run: (*respConn).cmdCluster},
		{name: "readonly", arity: 1, flags: meta, acl: []string{"@fast", "@connection"}, run: (*respConn).cmdReadOnly},
		{name: "readwrite", arity: 1, flags: meta, acl: []string{"@fast", "@connection"}, run: (*respConn).cmdReadWrite},
		{name: "asking", arity: 1, flags: []string{"fast"}, acl: []string{"@fast", "@connection"}, run: (*respConn).cmdOK},
		{name: "select", arity: 2, flags: meta, acl: []string{"@fast", "@connection"}, run: (*respConn).cmdSelect},
		{name: "multi", arity: 1, flags: txnFlags, acl: txnFast, controlsMulti: true, run: (*respConn).cmdMulti},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, acl: []string{"@slow", "@transaction"}, controlsMulti: true, run: (*respConn).cmdExec},
		{name: "discard", arity: 1, flags: txnFlags, acl: txnFast, controlsMulti: true, run: (*respConn).cmdDiscard},
		{name: "watch", arity: -2, flags: txnFlags, firstKey: 1, lastKey: -1, step: 1, acl: txnFast, controlsMulti: true, run: (*respConn).cmdWatch},
		{name: "unwatch", arity: 1, flags: txnFlags, acl: txnFast, run: (*respConn).cmdUnwatch},
	}
	table := make(map[string]*respCommand, len(list))
	for _, cmd := range list {
		table[cmd.name] = cmd
	}
	return table
}

// dispatch runs one command: HTTP refusal, lookup, arity, authentication, permissions, then the command
// itself, or, inside MULTI, its queueing (txn.go).
func (s *Server) dispatch(c *respConn, args [][]byte) {
	if isHTTPInput(args[0]) {
		c.refuseHTTP()
		return
	}
	c.busy()
	replyAt, sends := len(c.wr.buf), c.wr.sends
	defer c.recoverCommand(replyAt, c.wr.sends)
	cmd := s.lookup(args[0])
	ran, start := false, time.Time{}
	switch msg := c.admission(cmd, args); {
	case msg != "":
		c.reject(cmd, msg)
		if cmd != nil {
			c.stats.counted.countRejected(statName(cmd, args))
		}
	case c.queues(cmd):
		c.enqueue(cmd, args)
	default:
		ran, start = true, time.Now()
		c.runCommand(cmd, args)
		c.req = kv.Request{}
		c.stats.counted.commands++
		c.trackRead(cmd, args)
	}
	c.afterCommand(cmd)
	code, failed := c.countErrorCode(replyAt, sends)
	if ran { // EXEC counts as one, and each command it runs as one more (runQueued)
		c.countRun(cmd, args, time.Since(start), code, failed)
	}
	c.publishEvents()
}

// countRun counts one run of cmd for INFO commandstats: a redirect or a refusal of memory is a rejection,
// as Redis decides those before the command runs; any other error reply a failure.
func (c *respConn) countRun(cmd *respCommand, args [][]byte, took time.Duration, code string, failed bool) {
	name := statName(cmd, args)
	if failed && redirectCodes[code] {
		c.stats.counted.countRejected(name)
		return
	}
	c.stats.counted.countCommand(name, took, failed)
}

// admission returns why the connection may not run cmd (nil: unknown), or "" when it may.
func (c *respConn) admission(cmd *respCommand, args [][]byte) string {
	switch {
	case cmd == nil:
		return unknownCommandMessage(args)
	case !cmd.arityOK(len(args)):
		return "ERR wrong number of arguments for '" + cmd.name + "' command"
	case cmd.subArity != nil && !subcommandArityOK(cmd.subArity[strings.ToLower(string(args[1]))], len(args)):
		return "ERR wrong number of arguments for '" + cmd.fullName(args) + "' command"
	case c.user == nil && !cmd.noAuth:
		return "NOAUTH Authentication required."
	case c.user != nil:
		if msg := c.permissionError(cmd, args); msg != "" {
			return msg
		}
	}
	if c.wr.proto == 2 && !pubSubContext[cmd.name] && c.subscribed() {
		return pubSubContextMessage(cmd.fullName(args))
	}
	return ""
}

// lookup finds a command by name in any case, without allocating.
func (s *Server) lookup(name []byte) *respCommand {
	var lower [16]byte
	if len(name) > len(lower) {
		return nil
	}
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	return s.commands[string(lower[:len(name)])]
}

// unknownCommandMessage words the error the way Redis does, quoting the first arguments.
func unknownCommandMessage(args [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with: ", cString(args[0], 128))
	// Redis quotes arguments until the quoted list reaches 128 bytes, the last one cut to fit.
	quoted := 0
	for _, arg := range args[1:] {
		if quoted >= 128 {
			break
		}
		q := "'" + cString(arg, 128-quoted) + "' "
		quoted += len(q)
		b.WriteString(q)
	}
	return b.String()
}

// cString is b as Redis prints an argument with %.*s: up to its first NUL byte, at most n bytes.
func cString(b []byte, n int) string {
	if nul := bytes.IndexByte(b, 0); nul >= 0 {
		b = b[:nul]
	}
	return string(b[:min(len(b), n)])
}

// clip shortens b for an error message and replaces bytes that are not printable.
func clip(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\uFFFD' {
			return '?'
		}
		return r
	}, string(b))
}

// isSubcommand reports whether arg names sub, in any case.
func isSubcommand(arg []byte, sub string) bool { return bytes.EqualFold(arg, []byte(sub)) }

func (c *respConn) syntaxError() { c.wr.error("ERR syntax error") }

const notIntegerMessage = "ERR value is not an integer or out of range"

const wrongTypeMessage = "WRONGTYPE Operation against a key holding the wrong kind of value"

func (c *respConn) notInteger() { c.wr.error(notIntegerMessage) }

func (c *respConn) unknownSubcommand(cmd string, sub []byte) {
	c.wr.error(fmt.Sprintf("ERR unknown subcommand '%s'. Try %s HELP.", clip(sub, 128), strings.ToUpper(cmd)))
}

// ---- Ownership ----

// ownKey checks that this node actively owns key's partition and returns its segment. Otherwise it writes
// the redirect or refusal and reports false.
func (c *respConn) ownKey(key string) (int, bool) {
	if c.exec != nil {
		return c.exec.seg, true // EXEC checked the transaction's slot before it began
	}
	seg, refusal, owned := c.srv.node.CheckOwner(key)
	if !owned && c.mayReadReplica(refusal) {
		if seg, ok := c.srv.node.CheckReplica(key); ok {
			c.onReplica = true
			return seg, true
		}
	}
	if !owned {
		c.refuse(kv.KeySlot(key), refusal)
	}
	return seg, owned
}

// mayReadReplica reports whether the running command, refused by this node as an owner, may read its
// replica copy instead: a read-only command of a client that sent READONLY, outside MULTI, as Redis
// Cluster's replicas serve them.
func (c *respConn) mayReadReplica(refusal kv.Reply) bool {
	return c.replicaReads && c.reading && c.multi == nil && refusal.Status == kv.StatusMoved
}

// cmdReadOnly serves READONLY: the connection's reads of slots this node replicates are served from its
// copy, which may lag the owner's newest writes.
func (c *respConn) cmdReadOnly([][]byte) {
	c.replicaReads = true
	c.wr.simple("OK")
}

// cmdReadWrite serves READWRITE: reads go to the owner again.
func (c *respConn) cmdReadWrite([][]byte) {
	c.replicaReads = false
	c.wr.simple("OK")
}

// ownKeys checks that keys share one slot (CROSSSLOT otherwise, as in Redis Cluster) and that this node owns
// it. It returns the segment of all the keys.
func (c *respConn) ownKeys(keys [][]byte) (int, bool) {
	slot := kv.KeySlotBytes(keys[0])
	for _, k := range keys[1:] {
		if kv.KeySlotBytes(k) != slot {
			c.wr.error("CROSSSLOT Keys in request don't hash to the same slot")
			return 0, false
		}
	}
	return c.ownKey(string(keys[0]))
}

// respOOMError is Redis's reply to a write refused under maxmemory.
const respOOMError = "OOM command not allowed when used memory > 'maxmemory'."

// refuse writes the Redis Cluster reply for a status that keeps the node from serving slot.
func (c *respConn) refuse(slot uint16, reply kv.Reply) {
	switch reply.Status {
	case kv.StatusMoved:
		if addr := c.srv.respAddrOf(reply.Owner); addr != "" {
			c.wr.error("MOVED " + strconv.Itoa(int(slot)) + " " + addr)
			return
		}
		c.wr.error("CLUSTERDOWN Hash slot " + strconv.Itoa(int(slot)) + " is served by a node without a RESP endpoint")
	case kv.StatusOwnershipChanging, kv.StatusReplicaWriteRejected:
		c.wr.error("TRYAGAIN Ownership of hash slot " + strconv.Itoa(int(slot)) + " is changing, try again")
	case kv.StatusLocked:
		c.wr.error("TRYAGAIN A key of hash slot " + strconv.Itoa(int(slot)) + " is locked by a transaction being committed, try again")
	case kv.StatusPartitionUnavailable:
		c.wr.error("CLUSTERDOWN Hash slot " + strconv.Itoa(int(slot)) + " is not served")
	case kv.StatusNotReady:
		c.wr.error("CLUSTERDOWN The cluster has no slot map yet")
	case kv.StatusNotEnoughReplicas:
		c.wr.error("NOREPLICAS Not enough good replicas to write.")
	case kv.StatusInternal:
		c.wr.error(respInternalError)
	case kv.StatusLoadFailed:
		c.wr.error("ERR load failed: " + string(reply.Value))
	case kv.StatusOutOfMemory:
		c.wr.error(respOOMError)
	case kv.StatusUnconfirmed:
		c.wr.error("UNCONFIRMED The write was applied but ownership of hash slot " + strconv.Itoa(int(slot)) +
			" changed before its replicas confirmed it; it may or may not survive")
	default:
		c.wr.error("ERR " + reply.Status.String())
	}
}

// respAddrOf returns the RESP address the committed map records for id.
func (s *Server) respAddrOf(id kv.NodeID) string {
	return s.node.Topology().Nodes[id].RESPAddr
}

// apply runs one key operation on the owned segment seg. A reply that is not an answer to the operation
// (the node lost the partition meanwhile) is written as a refusal and reported false.
func (c *respConn) apply(op transport.Op, seg int, req *kv.Request) (kv.Reply, bool) {
	return c.answered(op, req, c.applyKV(op, seg, req))
}

// answered reports whether reply answers op, and otherwise writes the error or refusal it stands for.
func (c *respConn) answered(op transport.Op, req *kv.Request, reply kv.Reply) (kv.Reply, bool) {
	if c.srv.node.ReadOnly(op) {
		status := reply.Status
		if op == kv.OpType && string(reply.Value) == "none" {
			status = kv.StatusNotFound // TYPE of a missing key is a miss, as Redis counts it
		}
		c.stats.counted.lookup(status)
		if status == kv.StatusNotFound && c.reading {
			c.notify(notifyKeyMiss, "keymiss", []byte(req.Key))
		}
	}
	switch reply.Status {
	case kv.StatusSuccess, kv.StatusNotFound:
		return reply, true
	case kv.StatusWrongType:
		c.wr.error(wrongTypeMessage)
		return reply, false
	case kv.StatusTooLarge:
		if reply.Value != nil {
			c.wr.error(string(reply.Value))
			return reply, false
		}
		c.wr.error(replyTooLargeMessage)
		return reply, false
	case kv.StatusInvalidRequest:
		if reply.Value != nil {
			c.wr.error(string(reply.Value))
			return reply, false
		}
		c.wr.error(refusalMessage(op, reply.Int))
		return reply, false
	}
	c.refuse(kv.KeySlot(req.Key), reply)
	return reply, false
}

// refusalMessage words a key operation's refusal, with its refusal code, as Redis does.
func refusalMessage(op transport.Op, code int64) string {
	switch {
	case op == kv.OpIncr && code == kv.RefusedIncrOverflow:
		return "ERR increment or decrement would overflow"
	case op == kv.OpIncr:
		return notIntegerMessage
	case code == kv.RefusedNotFloat:
		return "ERR value is not a valid float"
	case code == kv.RefusedNotFinite:
		return "ERR increment would produce NaN or Infinity"
	case code == kv.RefusedTooLarge:
		return "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
	case op == kv.OpObject && code == kv.RefusedNoFrequency:
		return "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
	case op == kv.OpObject && code == kv.RefusedIdleTimeLFU:
		return "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
	case op == kv.OpObject && code == kv.RefusedNoIdleTime:
		return "ERR idle time is tracked only under an LRU maxmemory-policy (allkeys-lru, volatile-lru)"
	}
	return "ERR invalid request"
}

// request returns the connection's request, emptied, for key: a command that applies one request at a time
// builds it there rather than in memory of its own, since nothing keeps a request once it is applied. The
// request is emptied again after each command, so that an idle connection keeps no key or value alive.
func (c *respConn) request(key []byte) *kv.Request {
	c.req = kv.Request{Key: string(key)}
	return &c.req
}

// keyOp checks ownership of req.Key and applies op.
func (c *respConn) keyOp(op transport.Op, req *kv.Request) (kv.Reply, bool) {
	seg, ok := c.ownKey(req.Key)
	if !ok {
		return kv.Reply{}, false
	}
	return c.apply(op, seg, req)
}

// ---- Strings and keys ----

func (c *respConn) cmdGet(args [][]byte) {
	reply, ok := c.keyOp(kv.OpGet, c.request(args[1]))
	if !ok {
		return
	}
	c.valueReply(reply)
}

func (c *respConn) valueReply(reply kv.Reply) {
	if reply.Status == kv.StatusNotFound {
		c.wr.null()
		return
	}
	c.wr.bulk(reply.Value)
}

// setArgs is a parsed SET: SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL].
type setArgs struct {
	cond   kv.Cond
	expiry expiry
}

func (c *respConn) cmdSet(args [][]byte) {
	opts, ok := c.parseSet(args[3:])
	if !ok {
		return
	}
	req := c.request(args[1])
	req.Value, req.Cond = args[2], opts.cond // the store copies what it keeps
	opts.expiry.set(req)
	if opts.cond == 0 {
		if _, ok := c.keyOp(kv.OpPut, req); ok {
			c.wr.ok()
		}
		return
	}
	reply, ok := c.keyOp(kv.OpPutIf, req)
	switch {
	case !ok:
	case opts.cond&kv.CondReturnPrev != 0 && reply.Existed:
		c.wr.bulk(reply.Value)
	case opts.cond&kv.CondReturnPrev != 0 || reply.Int == 0:
		c.wr.null()
	default:
		c.wr.ok()
	}
}

// parseSet reads SET's options. As Redis does, an expiry may be given again in the same unit, the last one
// counting, and only that one is checked once the options have parsed. On a bad option it writes the error
// and reports false.
func (c *respConn) parseSet(opts [][]byte) (setArgs, bool) {
	var s setArgs
	var unit string
	var expiry []byte
	for i := 0; i < len(opts); i++ {
		opt := strings.ToUpper(string(opts[i]))
		switch {
		case opt == "NX" && s.cond&kv.CondIfExists == 0:
			s.cond |= kv.CondIfAbsent
		case opt == "XX" && s.cond&kv.CondIfAbsent == 0:
			s.cond |= kv.CondIfExists
		case opt == "GET":
			s.cond |= kv.CondReturnPrev
		case opt == "KEEPTTL" && unit == "":
			s.cond |= kv.CondKeepTTL
		case (opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && (unit == "" || unit == opt) &&
			s.cond&kv.CondKeepTTL == 0 && i+1 < len(opts):
			i++
			unit, expiry = opt, opts[i]
		default:
			c.syntaxError()
			return s, false
		}
	}
	if unit != "" {
		e, refusal := c.parseExpiry("set", unit, expiry)
		if refusal != "" {
			c.wr.error(refusal)
			return s, false
		}
		e.ttl = max(e.ttl, 1) // a time already past: the key is written expired, as Redis deletes it at once
		s.expiry = e
	}
	return s, true
}

func (c *respConn) cmdDel(args [][]byte) {
	c.countKeys(kv.OpDelete, args[1:])
}

func (c *respConn) cmdExists(args [][]byte) {
	c.countKeys(kv.OpExists, args[1:])
}

// countKeys applies op to every key (one slot) and replies how many succeeded.
func (c *respConn) countKeys(op transport.Op, keys [][]byte) {
	seg, ok := c.ownKeys(keys)
	if !ok {
		return
	}
	if !c.srv.node.ReadOnly(op) {
		size := 0
		for _, k := range keys {
			size += len(k) + kv.GroupOpOverhead
		}
		if !c.groupHasRoom(size) {
			return
		}
	}
	var count int64
	for _, k := range keys {
		reply, ok := c.apply(op, seg, c.request(k))
		if !ok {
			return
		}
		if reply.Status == kv.StatusSuccess {
			count++
		}
	}
	c.wr.int(count)
}

func (c *respConn) cmdMGet(args [][]byte) {
	keys := args[1:]
	seg, ok := c.ownKeys(keys)
	if !ok {
		return
	}
	replies := make([]kv.Reply, len(keys))
	for i, k := range keys {
		req := c.request(k)
		reply := c.applyKV(kv.OpGet, seg, req)
		if reply.Status == kv.StatusWrongType {
			reply = kv.Reply{Status: kv.StatusNotFound} // MGET answers nil for a key of another kind, as Redis does
		}
		if replies[i], ok = c.answered(kv.OpGet, req, reply); !ok {
			return
		}
	}
	c.wr.array(len(keys))
	for _, reply := range replies {
		c.valueReply(reply)
	}
}

func (c *respConn) cmdMSet(args [][]byte) {
	if seg, ok := c.ownPairs(args); ok && c.putPairs(seg, args) {
		c.wr.ok()
	}
}

// ownPairs checks the keys of a command of key and value pairs (MSET, MSETNX) as ownKeys does, then that
// every key has its value, as Redis Cluster checks them in that order. It returns the keys' segment.
func (c *respConn) ownPairs(args [][]byte) (int, bool) {
	keys := make([][]byte, 0, len(args)/2)
	for i := 1; i < len(args); i += 2 {
		keys = append(keys, args[i])
	}
	seg, ok := c.ownKeys(keys)
	if ok && len(args)%2 == 0 {
		c.wr.error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(clip(args[0], 32))))
		return 0, false
	}
	return seg, ok
}

// putPairs writes each key of a command of key and value pairs to its value, all or none: it reports
// false, having answered, when they do not fit in the command's group or a write is refused.
func (c *respConn) putPairs(seg int, args [][]byte) bool {
	size := 0
	for i := 1; i < len(args); i += 2 {
		size += len(args[i]) + len(args[i+1]) + kv.GroupOpOverhead
	}
	if !c.groupHasRoom(size) {
		return false
	}
	for i := 1; i < len(args); i += 2 {
		if _, ok := c.apply(kv.OpPut, seg, &kv.Request{Key: string(args[i]), Value: args[i+1]}); !ok {
			return false
		}
	}
	return true
}

// cmdIncr serves INCR, DECR, INCRBY and DECRBY.
func (c *respConn) cmdIncr(args [][]byte) {
	delta := int64(1)
	if len(args) == 3 {
		n, ok := kv.ParseCanonicalInt(args[2])
		if !ok {
			c.notInteger()
			return
		}
		delta = n
	}
	if args[0][0]|0x20 == 'd' {
		if delta == math.MinInt64 {
			c.wr.error("ERR decrement would overflow")
			return
		}
		delta = -delta
	}
	if reply, ok := c.keyOp(kv.OpIncr, &kv.Request{Key: string(args[1]), Delta: delta}); ok {
		c.wr.int(reply.Int)
	}
}

// cmdExpire serves EXPIRE and PEXPIRE. A non-positive time deletes the key, as in Redis.
func (c *respConn) cmdExpire(args [][]byte) {
	cond, msg := parseExpireOptions(args[3:])
	if msg != "" {
		c.wr.error(msg)
		return
	}
	n, ok := kv.ParseCanonicalInt(args[2])
	if !ok {
		c.notInteger()
		return
	}
	name := strings.ToLower(string(args[0]))
	scale := time.Second
	if name[0] == 'p' {
		scale = time.Millisecond
	}
	// Redis refuses a time in seconds whose milliseconds overflow, and a time whose deadline does; any other
	// time in the past deletes. Zaris keeps deadlines in nanoseconds, so it refuses one past 2262.
	if n > math.MaxInt64/int64(scale) || scale == time.Second && n < math.MinInt64/1000 {
		c.wr.error("ERR invalid expire time in '" + name + "' command")
		return
	}
	req := &kv.Request{Key: string(args[1]), TTL: -1, Cond: cond} // the store deletes on a non-positive TTL
	switch {
	case n <= 0:
	case strings.HasSuffix(name, "at"): // EXPIREAT, PEXPIREAT: a Unix time, which the owner keeps exactly
		if left := n*int64(scale) - c.srv.clock.Now().UnixNano(); left > 0 {
			req.TTL, req.ExpireAt = left, n*int64(scale)
		}
	case !c.deadlineFits(time.Duration(n) * scale):
		c.wr.error("ERR invalid expire time in '" + name + "' command")
		return
	default:
		req.TTL = n * int64(scale)
	}
	if reply, ok := c.keyOp(kv.OpExpire, req); ok {
		c.wr.int(kv.BoolInt(reply.Status == kv.StatusSuccess))
	}
}

// parseExpireOptions reads EXPIRE's options NX, XX, GT and LT, returning Redis's error for an unknown or
// incompatible one.
func parseExpireOptions(opts [][]byte) (kv.Cond, string) {
	var cond kv.Cond
	for _, opt := range opts {
		switch strings.ToUpper(string(opt)) {
		case "NX":
			cond |= kv.CondExpiryNone
		case "XX":
			cond |= kv.CondExpiryExists
		case "GT":
			cond |= kv.CondExpiryGreater
		case "LT":
			cond |= kv.CondExpiryLess
		default:
			return 0, "ERR Unsupported option " + cString(opt, len(opt))
		}
	}
	switch {
	case cond&kv.CondExpiryNone != 0 && cond != kv.CondExpiryNone:
		return 0, "ERR NX and XX, GT or LT options at the same time are not compatible"
	case cond&(kv.CondExpiryGreater|kv.CondExpiryLess) == kv.CondExpiryGreater|kv.CondExpiryLess:
		return 0, "ERR GT and LT options at the same time are not compatible"
	}
	return cond, ""
}

// cmdTTL serves TTL and PTTL, the time key has left, and EXPIRETIME and PEXPIRETIME, the Unix time at
// which it expires: in seconds or milliseconds, -2 without the key, -1 without an expiry. Like Redis, it
// rounds to the nearest millisecond, then to the nearest second.
func (c *respConn) cmdTTL(args [][]byte) {
	name := bytes.ToLower(args[0])
	op := kv.OpTTL
	if bytes.HasSuffix(name, []byte("expiretime")) {
		op = kv.OpExpiryTime
	}
	reply, ok := c.keyOp(op, &kv.Request{Key: string(args[1])})
	switch {
	case !ok:
		return
	case reply.Status == kv.StatusNotFound:
		c.wr.int(-2)
		return
	case reply.Int == -1: // no expiry
		c.wr.int(-1)
		return
	}
	half := int64(time.Millisecond) / 2
	ms := (min(reply.Int, math.MaxInt64-half) + half) / int64(time.Millisecond)
	if name[0] == 'p' {
		c.wr.int(ms)
	} else {
		c.wr.int((ms + 500) / 1000)
	}
}

func (c *respConn) cmdPersist(args [][]byte) {
	if reply, ok := c.keyOp(kv.OpPersist, &kv.Request{Key: string(args[1])}); ok {
		c.wr.int(reply.Int)
	}
}

func (c *respConn) cmdIncrByFloat(args [][]byte) {
	if reply, ok := c.keyOp(kv.OpIncrByFloat, &kv.Request{Key: string(args[1]), Value: args[2]}); ok {
		c.wr.bulk(reply.Value)
	}
}

// cmdAppend passes the argument without a copy: the store copies it into the new value.
func (c *respConn) cmdAppend(args [][]byte) {
	if reply, ok := c.keyOp(kv.OpAppend, &kv.Request{Key: string(args[1]), Value: args[2]}); ok {
		c.wr.int(reply.Int)
	}
}

func (c *respConn) cmdGetDel(args [][]byte) {
	if reply, ok := c.keyOp(kv.OpGetDel, &kv.Request{Key: string(args[1])}); ok {
		c.valueReply(reply)
	}
}

// cmdGetEx serves GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]. Without an option it keeps the expiry.
func (c *respConn) cmdGetEx(args [][]byte) {
	unit, arg, persist, ok := parseGetEx(args[2:])
	if !ok {
		c.syntaxError()
		return
	}
	req := &kv.Request{Key: string(args[1])}
	switch {
	case unit != "":
		e, msg := c.parseExpiry("getex", unit, arg)
		if msg != "" {
			c.badExpiry(req.Key, msg)
			return
		}
		e.set(req)
	case !persist:
		req.Cond = kv.CondKeepTTL
	}
	if reply, ok := c.keyOp(kv.OpGetEx, req); ok {
		c.valueReply(reply)
	}
}

// parseGetEx reads GETEX's options as Redis does: EX, PX, EXAT or PXAT with its argument, which may be
// given again (the last counts) but not beside another, or PERSIST. It reports false on a syntax error.
func parseGetEx(opts [][]byte) (unit string, arg []byte, persist, ok bool) {
	for i := 0; i < len(opts); i++ {
		switch opt := strings.ToUpper(string(opts[i])); {
		case opt == "PERSIST" && unit == "":
			persist = true
		case (opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && !persist && (unit == "" || unit == opt) &&
			i+1 < len(opts):
			unit, arg = opt, opts[i+1]
			i++
		default:
			return "", nil, false, false
		}
	}
	return unit, arg, persist, true
}

// expiry is an expiry as a command names it: ttl from now or, when at is set, the Unix time at in
// nanoseconds, which ttl then approximates. A ttl that is not positive names a time already past.
type expiry struct {
	ttl time.Duration
	at  int64
}

// set asks req for e: the deadline itself when it is still ahead, so the owner keeps it exactly.
func (e expiry) set(req *kv.Request) {
	req.TTL = int64(e.ttl)
	if e.at != 0 && e.ttl > 0 {
		req.ExpireAt = e.at
	}
}

// parseExpiry reads the argument of EX, PX, EXAT or PXAT. An invalid argument returns the error message
// Redis gives cmd.
func (c *respConn) parseExpiry(cmd, unit string, arg []byte) (expiry, string) {
	n, ok := kv.ParseCanonicalInt(arg)
	if !ok {
		return expiry{}, notIntegerMessage
	}
	scale := time.Second
	if unit == "PX" || unit == "PXAT" {
		scale = time.Millisecond
	}
	if n <= 0 || n > math.MaxInt64/int64(scale) {
		return expiry{}, "ERR invalid expire time in '" + cmd + "' command"
	}
	if unit == "EX" || unit == "PX" {
		ttl := time.Duration(n) * scale
		if !c.deadlineFits(ttl) {
			return expiry{}, "ERR invalid expire time in '" + cmd + "' command"
		}
		return expiry{ttl: ttl}, ""
	}
	at := n * int64(scale)
	ttl := time.Duration(at - c.srv.clock.Now().UnixNano())
	if ttl == 0 {
		ttl = -1 // a zero TTL would keep no expiry; a time reached deletes the key
	}
	return expiry{ttl: ttl, at: at}, ""
}

// deadlineFits reports whether a time to live from now ends at a deadline Zaris can keep: one before 2262,
// in nanoseconds since 1970.
func (c *respConn) deadlineFits(ttl time.Duration) bool {
	return int64(ttl) <= math.MaxInt64-c.srv.clock.Now().UnixNano()
}

// badExpiry answers GETEX's invalid expiry argument as Redis does, after looking the key up: null when the
// key is missing, WRONGTYPE for a collection, msg otherwise.
func (c *respConn) badExpiry(key, msg string) {
	reply, ok := c.keyOp(kv.OpType, &kv.Request{Key: key})
	switch t := string(reply.Value); {
	case !ok:
	case t == "none":
		c.wr.null()
	case t != "string":
		c.wr.error(wrongTypeMessage)
	default:
		c.wr.error(msg)
	}
}

// refuseString answers msg for a command refused by its arguments, after looking the key up as Redis
// does first: WRONGTYPE when it holds a collection.
func (c *respConn) refuseString(key []byte, msg string) {
	reply, ok := c.keyOp(kv.OpType, &kv.Request{Key: string(key)})
	switch t := string(reply.Value); {
	case !ok:
	case t != "none" && t != "string":
		c.wr.error(wrongTypeMessage)
	default:
		c.wr.error(msg)
	}
}

// cmdSetRange serves SETRANGE key offset value. An empty value writes nothing: it replies the length.
func (c *respConn) cmdSetRange(args [][]byte) {
	offset, ok := kv.ParseCanonicalInt(args[2])
	switch {
	case !ok:
		c.notInteger()
	case offset < 0:
		c.wr.error("ERR offset is out of range")
	case len(args[3]) == 0:
		c.cmdStrlen(args[:2])
	case offset > int64(c.srv.limits.maxBulk-len(args[3])):
		c.refuseString(args[1], refusalMessage(kv.OpSetRange, kv.RefusedTooLarge))
	default:
		if reply, ok := c.keyOp(kv.OpSetRange, &kv.Request{Key: string(args[1]), Delta: offset, Value: args[3]}); ok {
			c.wr.int(reply.Int)
		}
	}
}

// cmdGetRange serves GETRANGE key start end: the bytes from start to end included, negative positions
// counting from the end, as Redis clamps them.
func (c *respConn) cmdGetRange(args [][]byte) {
	start, ok1 := kv.ParseCanonicalInt(args[2])
	end, ok2 := kv.ParseCanonicalInt(args[3])
	if !ok1 || !ok2 {
		c.notInteger()
		return
	}
	reply, ok := c.keyOp(kv.OpGet, &kv.Request{Key: string(args[1])})
	if !ok {
		return
	}
	c.wr.bulk(byteRange(reply.Value, start, end))
}

// byteRange returns value[start:end+1] with Redis's GETRANGE rules for negative and outlying positions.
func byteRange(value []byte, start, end int64) []byte {
	first, last, ok := clampRange(start, end, int64(len(value)))
	if !ok {
		return nil
	}
	return value[first : last+1]
}

// clampRange applies Redis's rules for a range from start to end included over n units (GETRANGE,
// BITCOUNT): negative positions count from the end, and outlying ones are clamped. ok is false for an
// empty range.
func clampRange(start, end, n int64) (first, last int64, ok bool) {
	if start < 0 && end < 0 && start > end {
		return 0, 0, false
	}
	if start < 0 {
		start = max(n+start, 0)
	}
	if end < 0 {
		end = max(n+end, 0)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		return 0, 0, false
	}
	return start, end, true
}

func (c *respConn) cmdStrlen(args [][]byte) {
	if reply, ok := c.keyOp(kv.OpGet, &kv.Request{Key: string(args[1])}); ok {
		c.wr.int(int64(len(reply.Value)))
	}
}

func (c *respConn) cmdType(args [][]byte) {
	if reply, ok := c.keyOp(kv.OpType, &kv.Request{Key: string(args[1])}); ok {
		c.wr.simple(string(reply.Value))
	}
}

var objectSubcommandArity = map[string]int{"freq": 3, "idletime": 3, "encoding": 3, "refcount": 3, "help": 2}

// cmdObject serves OBJECT FREQ, IDLETIME, ENCODING and REFCOUNT of a key, read at its owner without
// counting as an access.
func (c *respConn) cmdObject(args [][]byte) {
	sub := strings.ToLower(clip(args[1], 16))
	switch {
	case sub == "help" && len(args) == 2:
		c.wr.array(len(objectHelp))
		for _, line := range objectHelp {
			c.wr.simple(line)
		}
	case objectSubcommandArity[sub] == 3 && len(args) == 3:
		what := sub
		if sub == "refcount" {
			what = "encoding" // every value has one reference
		}
		reply, ok := c.keyOp(kv.OpObject, &kv.Request{Key: string(args[2]), Args: [][]byte{[]byte(what)}})
		switch {
		case !ok:
		case reply.Status == kv.StatusNotFound:
			c.wr.null()
		case sub == "refcount":
			c.wr.int(1)
		case sub == "encoding":
			c.wr.bulk(reply.Value)
		default:
			c.wr.int(reply.Int)
		}
	default:
		c.unknownSubcommand("object", args[1])
	}
}

var objectHelp = []string{
	"OBJECT <subcommand> <key>. Subcommands are:",
	"ENCODING <key> -- how Redis would store the key's value as it is now.",
	"FREQ <key> -- the key's logarithmic access counter, under an LFU maxmemory-policy.",
	"IDLETIME <key> -- seconds since the key was last read or written, under an LRU maxmemory-policy.",
	"REFCOUNT <key> -- references to the value: always 1.",
	"HELP -- this text.",
}

// ---- Connection ----

func (c *respConn) cmdOK([][]byte) { c.wr.ok() }

func (c *respConn) cmdPing(args [][]byte) {
	if c.wr.proto == 2 && len(args) <= 2 && c.subscribed() { // a subscribed RESP2 client is answered in its context's form
		c.wr.array(2)
		c.wr.bulkString("pong")
		if len(args) == 2 {
			c.wr.bulk(args[1])
		} else {
			c.wr.bulkString("")
		}
		return
	}
	switch len(args) {
	case 1:
		c.wr.simple("PONG")
	case 2:
		c.wr.bulk(args[1])
	default:
		c.wr.error("ERR wrong number of arguments for 'ping' command")
	}
}

func (c *respConn) cmdEcho(args [][]byte) { c.wr.bulk(args[1]) }

func (c *respConn) cmdQuit([][]byte) {
	c.wr.ok()
	c.quit = true
}

func (c *respConn) cmdSelect(args [][]byte) {
	if n, ok := kv.ParseCanonicalInt(args[1]); !ok {
		c.notInteger()
	} else if n != 0 {
		c.wr.error("ERR SELECT is not allowed in cluster mode")
	} else {
		c.wr.ok()
	}
}

func (c *respConn) helloReply() {
	c.wr.mapOf(7)
	c.wr.bulkString("server")
	c.wr.bulkString("redis")
	c.wr.bulkString("version")
	c.wr.bulkString(respVersion)
	c.wr.bulkString("proto")
	c.wr.int(int64(c.wr.proto))
	c.wr.bulkString("id")
	c.wr.int(c.id)
	c.wr.bulkString("mode")
	c.wr.bulkString("cluster")
	c.wr.bulkString("role")
	c.wr.bulkString("master")
	c.wr.bulkString("modules")
	c.wr.array(0)
}

func validClientName(name []byte) bool {
	for _, ch := range name {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

// clientSubcommandArity is the arity of each CLIENT subcommand served, in Redis's convention.
var clientSubcommandArity = map[string]int{"setname": 3, "getname": 2, "id": 2, "setinfo": 4, "info": 2,
	"tracking": -3, "caching": 3, "trackinginfo": 2}

// cmdClient serves the CLIENT subcommands clients send while connecting.
func (c *respConn) cmdClient(args [][]byte) {
	sub := args[1]
	switch {
	case isSubcommand(sub, "SETNAME") && len(args) == 3:
		if !validClientName(args[2]) {
			c.wr.error("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		c.name = string(args[2])
		c.wr.ok()
	case isSubcommand(sub, "GETNAME") && len(args) == 2:
		if c.name == "" {
			c.wr.null()
			return
		}
		c.wr.bulkString(c.name)
	case isSubcommand(sub, "ID") && len(args) == 2:
		c.wr.int(c.id)
	case isSubcommand(sub, "SETINFO") && len(args) == 4:
		if !isSubcommand(args[2], "LIB-NAME") && !isSubcommand(args[2], "LIB-VER") {
			c.wr.error(fmt.Sprintf("ERR Unrecognized option '%s'", clip(args[2], 64)))
			return
		}
		c.wr.ok()
	case isSubcommand(sub, "INFO") && len(args) == 2:
		c.wr.bulkString(fmt.Sprintf("id=%d addr=%s laddr=%s name=%s resp=%d\n",
			c.id, c.conn.RemoteAddr(), c.conn.LocalAddr(), c.name, c.wr.proto))
	case isSubcommand(sub, "TRACKING") && len(args) >= 3:
		c.cmdClientTracking(args[2:])
	case isSubcommand(sub, "CACHING") && len(args) == 3:
		c.cmdClientCaching(args[2])
	case isSubcommand(sub, "TRACKINGINFO") && len(args) == 2:
		c.writeTrackingInfo()
	default:
		c.unknownSubcommand("client", sub)
	}
}

// subcommandArityOK reports whether n arguments fit a subcommand's arity; 0, an unknown subcommand, fits any.
func subcommandArityOK(arity, n int) bool {
	return arity == 0 || arity > 0 && n == arity || arity < 0 && n >= -arity
}

// ---- Introspection ----

// cmdCommand serves COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND LIST and COMMAND DOCS. The table is what
// cluster clients read to find the keys of a command.
func (c *respConn) cmdCommand(args [][]byte) {
	if len(args) == 1 {
		c.wr.array(len(c.srv.commands))
		for _, cmd := range c.srv.commands {
			c.writeCommandInfo(cmd)
		}
		return
	}
	switch sub := args[1]; {
	case isSubcommand(sub, "COUNT") && len(args) == 2:
		c.wr.int(int64(len(c.srv.commands)))
	case isSubcommand(sub, "INFO"):
		c.wr.array(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := c.srv.lookup(name); cmd != nil {
				c.writeCommandInfo(cmd)
			} else {
				c.wr.null()
			}
		}
	case isSubcommand(sub, "LIST") && len(args) == 2:
		c.wr.array(len(c.srv.commands))
		for name := range c.srv.commands {
			c.wr.bulkString(name)
		}
	case isSubcommand(sub, "DOCS"):
		c.wr.mapOf(0)
	default:
		c.unknownSubcommand("command", sub)
	}
}

// writeCommandInfo writes one entry in the ten-field form of Redis 7: name, arity, flags, first key, last
// key, step, ACL categories, tips, key specifications, subcommands.
func (c *respConn) writeCommandInfo(cmd *respCommand) {
	c.wr.array(10)
	c.wr.bulkString(cmd.name)
	c.wr.int(int64(cmd.arity))
	c.wr.array(len(cmd.flags))
	for _, f := range cmd.flags {
		c.wr.simple(f)
	}
	c.wr.int(int64(cmd.firstKey))
	c.wr.int(int64(cmd.lastKey))
	c.wr.int(int64(cmd.step))
	c.wr.array(len(cmd.acl))
	for _, a := range cmd.acl {
		c.wr.simple(a)
	}
	c.wr.array(0) // tips
	c.wr.array(0) // key specifications
	c.wr.array(0) // subcommands
}

// configSet changes the parameters CONFIG SET may change at run time: maxmemory, maxmemory-policy and
// notify-keyspace-events. Like Redis, it changes all of them or none.
func (c *respConn) configSet(pairs [][]byte) {
	limit, policy := int64(-1), ""
	notify, setNotify := notifyClasses(0), false
	for i := 0; i < len(pairs); i += 2 {
		name, value := strings.ToLower(string(pairs[i])), string(pairs[i+1])
		switch name {
		case "maxmemory":
			n, err := kv.ParseMemorySize(value)
			if err != nil {
				c.wr.error("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument couldn't be parsed into an integer")
				return
			}
			limit = n
		case "maxmemory-policy":
			policies := c.srv.node.Memory().Policies()
			if !slices.ContainsFunc(policies, func(p string) bool { return strings.EqualFold(p, value) }) {
				c.wr.error("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: " +
					strings.Join(policies, ", "))
				return
			}
			policy = value
		case "notify-keyspace-events":
			classes, ok := parseNotifyClasses(value)
			if !ok {
				c.wr.error(invalidNotifyMessage)
				return
			}
			notify, setNotify = classes, true
		default:
			c.wr.error("ERR Unknown option or number of arguments for CONFIG SET - '" + name + "'")
			return
		}
	}
	if limit >= 0 {
		if err := c.srv.node.Memory().CheckMax(limit); err != nil {
			c.wr.error("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - " + err.Error())
			return
		}
	}
	if policy != "" {
		if err := c.srv.node.Memory().SetPolicy(policy); err != nil {
			c.wr.error("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - " + err.Error())
			return
		}
	}
	if limit >= 0 {
		_ = c.srv.node.Memory().SetMax(limit) // checked above
	}
	if setNotify {
		c.srv.notify.Store(uint32(notify))
	}
	c.wr.ok()
}

// respConfig answers CONFIG GET with the endpoint's real limits and harmless values for the rest, so tools
// that read settings at start-up carry on. requirepass reads empty: no client learns a password from it.
func (c *respConn) respConfig() [][2]string {
	s := c.srv
	return [][2]string{
		{"appendonly", "no"},
		{"save", ""},
		{"databases", "1"},
		{"maxmemory", strconv.FormatInt(s.node.Memory().Limit(), 10)},
		{"maxmemory-policy", s.node.Memory().PolicyName()},
		{"timeout", strconv.FormatInt(int64(s.timeouts.idle/time.Second), 10)},
		{"maxclients", strconv.Itoa(s.maxClients)},
		{"cluster-enabled", "yes"},
		{"proto-max-bulk-len", strconv.Itoa(s.limits.maxBulk)},
		{"client-query-buffer-limit", strconv.Itoa(s.limits.maxQuery)},
		{"requirepass", ""},
		{"notify-keyspace-events", notifyClasses(s.notify.Load()).String()},
	}
}

// configSubcommandArity are CONFIG's subcommands, as Redis 7 declares them.
var configSubcommandArity = map[string]int{"get": -3, "set": -4, "resetstat": 2, "rewrite": 2, "help": 2}

func (c *respConn) cmdConfig(args [][]byte) {
	switch sub := args[1]; {
	case isSubcommand(sub, "GET") && len(args) >= 3:
		var match [][2]string
		for _, kv := range c.respConfig() {
			for _, pattern := range args[2:] {
				if glob.Match(pattern, []byte(kv[0]), true) {
					match = append(match, kv)
					break
				}
			}
		}
		c.wr.mapOf(len(match))
		for _, kv := range match {
			c.wr.bulkString(kv[0])
			c.wr.bulkString(kv[1])
		}
	case isSubcommand(sub, "RESETSTAT") && len(args) == 2:
		c.srv.resetStats(c)
		c.wr.ok()
	case isSubcommand(sub, "SET") && len(args) >= 4 && len(args)%2 == 0:
		c.configSet(args[2:])
	case isSubcommand(sub, "SET"):
		c.wr.error("ERR wrong number of arguments for 'config|set' command")
	case isSubcommand(sub, "REWRITE"):
		c.wr.error("ERR CONFIG " + strings.ToUpper(string(sub)) + " is not supported by this server")
	default:
		c.unknownSubcommand("config", sub)
	}
}
