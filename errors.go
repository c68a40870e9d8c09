package zaris

import (
	"errors"
	"fmt"

	"github.com/zaris-go/zaris/durability"
)

// Errors returned by Node methods; match them with errors.Is.
var (
	ErrNotFound             = errors.New("zaris: key not found")
	ErrMoved                = errors.New("zaris: partition owned by another node")
	ErrOwnershipChanging    = errors.New("zaris: partition ownership is changing")
	ErrReplicaWriteRejected = errors.New("zaris: write rejected by a replica (stale epoch)")
	ErrPartitionUnavailable = errors.New("zaris: partition unavailable")
	ErrNotEnoughReplicas    = errors.New("zaris: fewer in-sync copies than MinInSync")
	ErrVersionMismatch      = errors.New("zaris: version mismatch")
	ErrInvalidRequest       = errors.New("zaris: invalid request")
	ErrNotReady             = errors.New("zaris: node has no cluster map yet")
	ErrValueTooLarge        = errors.New("zaris: value too large")
	ErrRetriesExhausted     = errors.New("zaris: routing retries exhausted")
	ErrClosed               = errors.New("zaris: node closed")
	ErrInvalidConfig        = errors.New("zaris: invalid config")
	ErrClusterMismatch      = errors.New("zaris: cluster parameters differ")
	ErrDecode               = errors.New("zaris: value does not decode")
	ErrInvalidLayout        = errors.New("zaris: invalid layout")
	// ErrIncompatibleVersion: a peer's protocol, or the cluster's, is too old or too new for this node's,
	// or a data dir was written in a newer format than this release reads. The error names both versions.
	ErrIncompatibleVersion = errors.New("zaris: incompatible versions")
	// ErrNoReply marks a batch item that got no answer from its owner: the request failed in transit, or the
	// context ended first. The wrapped cause says which and names the node; a write may or may not have been
	// applied.
	ErrNoReply = errors.New("zaris: no reply from the owner")
	// ErrUnconfirmed: the owner applied a Sync write but lost its partition before the replicas confirmed
	// it. It may or may not survive, so it is not retried: sent again it could apply twice.
	ErrUnconfirmed = errors.New("zaris: write applied but not confirmed before the owner changed")
	// ErrNotInteger: Incr found a value that is not a decimal 64-bit integer, or the sum overflows.
	ErrNotInteger = errors.New("zaris: value is not an integer or out of range")
	// ErrNotFloat: IncrByFloat found a value that is not a number, or the result would not be finite.
	ErrNotFloat = errors.New("zaris: value is not a valid float or the result is not finite")
	// ErrConditionNotMet: a Put with IfAbsent or IfExists did not write because its condition failed.
	ErrConditionNotMet = errors.New("zaris: put condition not met")
	// ErrWrongType: the key holds another kind of value (a string, hash, set, list or sorted set) than the
	// operation works on.
	ErrWrongType = errors.New("zaris: operation against a key holding the wrong kind of value")
	// ErrTooManyWatchers: the owner of a watched key already serves Config.MaxWatchers watchers.
	ErrTooManyWatchers = errors.New("zaris: too many watchers on the owner")
	// ErrConflict: a transaction did not commit because a key it read changed before the commit.
	ErrConflict = errors.New("zaris: transaction conflict")
	// ErrLocked: the key stayed held by a transaction being committed through every retry.
	ErrLocked = errors.New("zaris: key locked by a transaction")
	// ErrQuorumReachable: RecoverControlPlane refused, as the control plane may still have a quorum.
	ErrQuorumReachable = errors.New("zaris: control-plane quorum still reachable")
	// ErrInternal: the node serving the operation hit a bug of its own (a panic, logged there with its
	// stack). The operation wrote nothing, or the node stopped serving and its partitions fail over.
	ErrInternal = errors.New("zaris: internal error")
	// ErrLoadFailed: a read found its key missing and Config.Loader failed to load it, or the caller gave up
	// waiting for the load. The loader's error reaches the caller as text after it; nothing was stored.
	ErrLoadFailed = errors.New("zaris: load failed")
	// ErrOutOfMemory: a write that would grow memory was refused, as its partition holds its share of
	// Config.MaxMemory and the eviction policy (noeviction) frees nothing. Reads and deletes are served.
	ErrOutOfMemory = errors.New("zaris: out of memory: the write would exceed MaxMemory")
	// ErrNotDrained: Leave's context ended before rebalancing had moved this node's partitions away (no
	// leader, or nowhere to move them). Where the node held the only live copy of a partition it left as a
	// failed node, not as one that said goodbye, and the error names how many such partitions it took along.
	ErrNotDrained = errors.New("zaris: leave: partitions not drained")
	// ErrBadBackup: Restore refused a backup that is incomplete, damaged (a checksum or size differs from
	// its manifest's), or of a format this release does not read. The error names the file.
	ErrBadBackup = durability.ErrBadBackup
	// ErrNotEmpty: Restore refused a cluster that holds keys, as it was not asked to replace them.
	ErrNotEmpty = errors.New("zaris: the cluster holds data")
)

// RoutingError reports an operation that kept landing on non-owners until its retries ran out.
type RoutingError struct {
	Partition int
	Attempts  int
	Last      Status
}

func (e *RoutingError) Error() string {
	return fmt.Sprintf("zaris: partition %d: last reply %s after %d attempts: routing retries exhausted",
		e.Partition, e.Last, e.Attempts)
}

// Unwrap lets errors.Is match both ErrRetriesExhausted and the last status's sentinel.
func (e *RoutingError) Unwrap() []error { return []error{ErrRetriesExhausted, statusErr(e.Last)} }

// VersionMismatchError reports a conditional write that found the key at another version than the one it
// was given. Current is that version, 0 when the key had no live value. It matches ErrVersionMismatch.
type VersionMismatchError struct {
	Key     string
	Current uint64
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("zaris: key %q is at version %d: version mismatch", e.Key, e.Current)
}

// Unwrap lets errors.Is match ErrVersionMismatch.
func (e *VersionMismatchError) Unwrap() error { return ErrVersionMismatch }

// ConflictError reports a transaction that did not commit because Key, read at version Read, was at
// Current when the transaction committed (0: no live value). It matches ErrConflict.
type ConflictError struct {
	Key     string
	Read    uint64
	Current uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("zaris: transaction read key %q at version %d, now at %d: transaction conflict", e.Key, e.Read, e.Current)
}

// Unwrap lets errors.Is match ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// errNoPeer says the routing table holds no connection to a node: the map does not list it, or it is this
// node.
var errNoPeer = errors.New("zaris: no connection to node")
