package zaris

import (
	"fmt"

	"github.com/zaris-go/zaris/internal/kv"
)

// Status is the outcome of one operation on its owner. Every reply carries exactly one; the public API turns
// the failures into errors matched with errors.Is.
type Status = kv.Status

// The statuses, documented where they are declared.
const (
	StatusSuccess              = kv.StatusSuccess
	StatusNotFound             = kv.StatusNotFound
	StatusMoved                = kv.StatusMoved
	StatusOwnershipChanging    = kv.StatusOwnershipChanging
	StatusReplicaWriteRejected = kv.StatusReplicaWriteRejected
	StatusPartitionUnavailable = kv.StatusPartitionUnavailable
	StatusVersionMismatch      = kv.StatusVersionMismatch
	StatusInvalidRequest       = kv.StatusInvalidRequest
	StatusNotReady             = kv.StatusNotReady
	StatusNotEnoughReplicas    = kv.StatusNotEnoughReplicas
	StatusNoReply              = kv.StatusNoReply
	StatusUnconfirmed          = kv.StatusUnconfirmed
	StatusWrongType            = kv.StatusWrongType
	StatusTooLarge             = kv.StatusTooLarge
	StatusTooManyWatchers      = kv.StatusTooManyWatchers
	StatusLocked               = kv.StatusLocked
	StatusInternal             = kv.StatusInternal
	StatusLoadFailed           = kv.StatusLoadFailed
	StatusOutOfMemory          = kv.StatusOutOfMemory
)

// settleApplied returns the status of a write the owner applied, once waiting for its replicas ended in
// status. A status that would send the caller to retry at the new owner becomes StatusUnconfirmed: the
// new owner may hold the write already, and a retry would apply it again.
func settleApplied(status Status) Status {
	if status.RequiresRefresh() {
		return StatusUnconfirmed
	}
	return status
}

// statusErr maps a failed status to its sentinel error, and success to nil.
func statusErr(s Status) error {
	switch s {
	case StatusSuccess:
		return nil
	case StatusNotFound:
		return ErrNotFound
	case StatusMoved:
		return ErrMoved
	case StatusOwnershipChanging:
		return ErrOwnershipChanging
	case StatusReplicaWriteRejected:
		return ErrReplicaWriteRejected
	case StatusPartitionUnavailable:
		return ErrPartitionUnavailable
	case StatusVersionMismatch:
		return ErrVersionMismatch
	case StatusInvalidRequest:
		return ErrInvalidRequest
	case StatusNotReady:
		return ErrNotReady
	case StatusNotEnoughReplicas:
		return ErrNotEnoughReplicas
	case StatusNoReply:
		return ErrNoReply
	case StatusUnconfirmed:
		return ErrUnconfirmed
	case StatusWrongType:
		return ErrWrongType
	case StatusTooLarge:
		return ErrValueTooLarge
	case StatusTooManyWatchers:
		return ErrTooManyWatchers
	case StatusLocked:
		return ErrLocked
	case StatusInternal:
		return ErrInternal
	case StatusLoadFailed:
		return ErrLoadFailed
	case StatusOutOfMemory:
		return ErrOutOfMemory
	}
	return fmt.Errorf("zaris: unknown status %d", uint8(s))
}

// replyErr is the reply's status as an error, with the loader's error text for StatusLoadFailed.
func replyErr(r kv.Reply) error {
	if r.Status == StatusLoadFailed && len(r.Value) > 0 {
		return fmt.Errorf("%w: %s", ErrLoadFailed, r.Value)
	}
	return statusErr(r.Status)
}
