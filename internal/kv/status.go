package kv

import "fmt"

// Status is the outcome of one operation on its owner. Every reply carries exactly one; the public API turns
// the failures into errors matched with errors.Is.
type Status uint8

const (
	// StatusSuccess: the operation was applied (or the value found).
	StatusSuccess Status = iota
	// StatusNotFound: the key has no live value.
	StatusNotFound
	// StatusMoved: the receiver is not the active owner of the key's partition; the reply names the owner.
	StatusMoved
	// StatusOwnershipChanging: the partition is being handed over; retry after a map refresh.
	StatusOwnershipChanging
	// StatusReplicaWriteRejected: a replica refused a write from a stale epoch.
	StatusReplicaWriteRejected
	// StatusPartitionUnavailable: no node can serve the partition right now.
	StatusPartitionUnavailable
	// StatusVersionMismatch: a conditional write found another version.
	StatusVersionMismatch
	// StatusInvalidRequest: the request was malformed or out of bounds (e.g. a value over the size limit).
	StatusInvalidRequest
	// StatusNotReady: the receiver has no cluster map yet.
	StatusNotReady
	// StatusNotEnoughReplicas: a Sync write had fewer in-sync copies than MinInSync, and so was refused or,
	// when copies dropped out while it waited, not acknowledged.
	StatusNotEnoughReplicas
	// StatusNoReply: no owner answered (a batch item whose request failed in transit or was never sent).
	// The sender sets it; it never travels.
	StatusNoReply
	// StatusUnconfirmed: the owner applied a write but lost the partition before its replicas confirmed
	// it. The write may or may not survive; sent again, it could take effect twice.
	StatusUnconfirmed
	// StatusWrongType: the key holds another kind of value than the operation works on.
	StatusWrongType
	// StatusTooLarge: a collection operation's arguments, or its reply, exceed the limits.
	StatusTooLarge
	// StatusTooManyWatchers: the owner already serves Config.MaxWatchers watchers.
	StatusTooManyWatchers
	// StatusLocked: a transaction being committed holds the key; the operation was not applied. Callers
	// retry after a pause: the transaction resolves the key, or its owner does once it times out.
	StatusLocked
	// StatusInternal: the operation failed on a bug of the node serving it (a panic it recovered and logged).
	StatusInternal
	// StatusLoadFailed: the key was missing and Config.Loader failed to load it; the reply's Value holds the
	// loader's error text.
	StatusLoadFailed
	// StatusOutOfMemory: the write would grow the partition past its share of Config.MaxMemory, and the
	// eviction policy frees nothing; nothing was written.
	StatusOutOfMemory
)

// NumStatuses counts the statuses; each is below it.
const NumStatuses = len(statusNames)

var statusNames = [...]string{
	StatusSuccess:              "Success",
	StatusNotFound:             "NotFound",
	StatusMoved:                "Moved",
	StatusOwnershipChanging:    "OwnershipChanging",
	StatusReplicaWriteRejected: "ReplicaWriteRejected",
	StatusPartitionUnavailable: "PartitionUnavailable",
	StatusVersionMismatch:      "VersionMismatch",
	StatusInvalidRequest:       "InvalidRequest",
	StatusNotReady:             "NotReady",
	StatusNotEnoughReplicas:    "NotEnoughReplicas",
	StatusNoReply:              "NoReply",
	StatusUnconfirmed:          "Unconfirmed",
	StatusWrongType:            "WrongType",
	StatusTooLarge:             "TooLarge",
	StatusTooManyWatchers:      "TooManyWatchers",
	StatusLocked:               "Locked",
	StatusInternal:             "Internal",
	StatusLoadFailed:           "LoadFailed",
	StatusOutOfMemory:          "OutOfMemory",
}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// RequiresRefresh reports whether the status says the caller's routing table is stale. Only these statuses
// refresh the map, so a failing peer cannot cause a refresh storm.
func (s Status) RequiresRefresh() bool {
	return s == StatusMoved || s == StatusOwnershipChanging || s == StatusReplicaWriteRejected
}
