package durability

import "errors"

var (
	// ErrCorrupt means stored or received bytes are not what this package wrote.
	ErrCorrupt = errors.New("durability: corrupt data")

	// ErrTruncated means the requested revision is behind the retained log: the caller needs a snapshot.
	ErrTruncated = errors.New("durability: ops no longer retained")

	// ErrClosed is returned by every method of a closed store.
	ErrClosed = errors.New("durability: store closed")

	// ErrOutOfOrder means an appended op does not carry its segment's next revision: it leaves a gap or
	// repeats a revision already in the log. None of that segment's ops in the Append were applied.
	ErrOutOfOrder = errors.New("durability: op out of revision order")

	// ErrInvalidOp means an appended op is malformed: an unknown kind, or a delete carrying a value.
	// None of that segment's ops in the Append were applied.
	ErrInvalidOp = errors.New("durability: invalid op")
)

// Store keeps per-segment op logs and snapshots. It is safe for concurrent use.
//
// # Bounds
//
// Each segment's log is a contiguous run of revisions [first, last]. A segment never written nor
// truncated, or reset since, has bounds (0, 0). A log emptied by truncation keeps its place:
// first = last+1, where last is the highest revision it ever held (or rev-1 after TruncateBefore(rev)
// past its end). In every case the next revision to append is last+1, and ops after revision a can be
// served iff a+1 >= first.
//
// Returned ops and snapshots are read-only: the caller must not modify their Value bytes.
type Store interface {
	// Append adds ops to the logs in one atomic write. Within a segment, ops must carry consecutive
	// revisions starting at the segment's last+1. A segment with a gap or a step back (ErrOutOfOrder) or
	// a malformed op (ErrInvalidOp) gets none of its ops applied; the other segments get theirs. The
	// error joins one error per refused segment, each naming it. Appends are not synced (see Sync).
	Append(ops []Op) error

	// Ops returns, in order, up to limit ops of segment with Revision > after; limit <= 0 means no
	// limit. It returns ErrTruncated when after+1 is below the first retained revision, and no ops (and
	// no error) when after >= last.
	Ops(segment uint32, after uint64, limit int) ([]Op, error)

	// Bounds returns the first and last retained revisions of segment, as described on Store.
	Bounds(segment uint32) (first, last uint64, err error)

	// TruncateBefore drops the ops of segment with Revision < rev, so that first becomes rev. A rev past
	// last+1 empties the log, and the next append must carry rev, as after installing a snapshot at
	// rev-1. A rev at or below first changes nothing.
	TruncateBefore(segment uint32, rev uint64) error

	// LogBytes returns the approximate size of segment's retained log where the store keeps it (on disk,
	// or in memory), for size-bounded retention.
	LogBytes(segment uint32) (int64, error)

	// SaveSnapshot replaces the snapshot of s.Segment. Like Append, it is not synced.
	SaveSnapshot(s *Snapshot) error

	// LoadSnapshot returns segment's snapshot; ok is false when it has none.
	LoadSnapshot(segment uint32) (s Snapshot, ok bool, err error)

	// ResetSegment drops segment's ops, snapshot and truncation point in one atomic write, leaving it as
	// if never written, so that a copy replaced by another history keeps none of the old one's ops. Like
	// Append, it is not synced.
	ResetSegment(segment uint32) error

	// Segments lists, ascending, the segments with a snapshot or with bounds other than (0, 0).
	Segments() ([]uint32, error)

	// Sync makes every write so far durable.
	Sync() error

	// Close releases the store, waiting for calls in progress. Later calls return ErrClosed; closing
	// again returns nil.
	Close() error
}
