// Package durability stores what a Zaris node needs to catch up and to restart: for each segment, the
// log of ops its owner applied, in revision order, and optionally a snapshot of the segment's whole
// state. A replica that is behind asks for the ops after its last revision (Store.Ops). One behind the
// retained log gets ErrTruncated and needs a snapshot first. A restarted node loads each segment's
// snapshot and replays the ops above its revision.
//
// Two stores implement Store: Memory, for tests, nodes that hold the map as a pure cache and a node's
// recent ops (bounded by MemoryOptions), and Pebble, on github.com/cockroachdb/pebble/v2.
//
// # Durability
//
// Appends, truncations, resets and snapshot saves are each one Pebble batch written to the WAL without
// fsync, which keeps the write path cheap. A crash may lose the latest of them but never reorders them or
// damages earlier ones, so the log after restart is a prefix of the one before, and a replica that lost
// its tail catches up like any replica that is behind. Sync and a clean Close make everything durable.
//
// # Revisions
//
// Each segment's log holds a contiguous run of revisions, starting at 1. Append refuses any other
// revision with ErrOutOfOrder, segment by segment: a refused segment gets none of the call's ops, the
// others all of theirs.
//
// TruncateBefore drops the head of the log for retention, and also sets where an empty log resumes: a
// replica that installs a snapshot at revision r calls SaveSnapshot, then TruncateBefore(segment, r+1),
// and appends from r+1 on. A snapshot of another history, possibly at a lower revision than the log
// holds, is preceded by ResetSegment, which leaves the segment as if never written. See Store for the
// exact bounds.
//
// # Layout on disk
//
// Pebble keys are a prefix byte, the big-endian segment and, for ops, the big-endian revision, so one
// segment's ops are contiguous and ordered: 'o' segment revision holds an op (its log offset, then its
// msgpack encoding from AppendOp), 's' segment a snapshot (AppendSnapshot), 'f' segment the revision
// of the last truncation. Truncation is one range deletion, and a reset one batch that deletes the ops,
// the snapshot and the floor. Bounds and log sizes are rebuilt at open from the first and last op of
// each segment, so opening costs a few seeks per segment, not a scan.
//
// # Corruption
//
// The codecs never panic on malformed input and never allocate more than a small multiple of it. They
// return errors wrapping ErrCorrupt, and the Pebble store reports damage the same way, skipping nothing:
//
//   - OpenPebble fails on what Pebble detects while opening (a malformed MANIFEST, a table file the
//     MANIFEST lists but that is missing, a WAL other than the newest cut short, a table checksum
//     mismatch met while indexing) and on what the index scan checks: a key of the wrong shape or with an
//     unknown prefix, the first or last op of a log without its offset, a log that does not start at its
//     truncation floor (or at 1 without one), a log whose revision span cannot fit in its bytes.
//   - Ops fails, naming the segment and revision, on an op that does not decode, that holds another
//     segment or revision than its key, or that is missing from the middle of the log; LoadSnapshot on a
//     snapshot that does not decode or belongs to another segment; any call on a table checksum mismatch.
//
// The newest WAL ending mid-record is what a crash leaves: Pebble replays up to the tear and the logs
// come back as a prefix of what was appended. Other failures (a directory locked by another process,
// permissions) are returned with the directory as context and do not wrap ErrCorrupt. Pebble's failures
// to write its WAL or MANIFEST, which it treats as fatal, panic after being logged.
//
// # Raft store
//
// RaftStore keeps the control plane's raft state, hashicorp/raft's LogStore and StableStore, in a Pebble
// database of its own, in another directory than the op-log store's. Unlike the op log, every write to
// it is synced before it returns, since raft's safety rests on its log, term and vote being on stable
// storage before it answers a peer. The encoding is in raftlog.go and the key layout in raftstore.go.
// Damage found at open or in GetLog wraps ErrCorrupt. A key never set makes Get and GetUint64 fail with
// the message "not found", which raft recognises by its text.
package durability
