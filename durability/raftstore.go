package durability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// Key layout of the raft store, a Pebble database of its own. A prefix byte names each record's kind:
//
//	'k' key       a stable store value, under raft's key as given; value = the bytes of Set, or the
//	              big-endian uint64 of SetUint64
//	'l' index(8)  a raft log entry, under its big-endian index so that entries sort by index;
//	              value = appendRaftLog bytes
//
// The prefixes are not the op-log store's, and no byte sorts between them, so the first and the last
// key of the database tell whether every key has one of them: opening the wrong directory fails.
const (
	raftStablePrefix byte = 'k'
	raftLogPrefix    byte = 'l'

	raftLogKeyLen = 1 + 8
)

// errStableNotFound is what Get and GetUint64 return for a key never set. Raft recognises a missing
// key by this exact message, as its own in-memory store words it, not by error identity.
var errStableNotFound = errors.New("not found")

// RaftStore is raft's LogStore and StableStore on a Pebble database. Every write is synced before it
// returns: raft answers votes and appends only once its log and vote are on stable storage. The
// first and last log index are kept in memory and found at open with a few seeks.
//
// Damage is reported as in the op-log store: an entry that does not decode, or holds another index than
// its key, is an error wrapping ErrCorrupt, at open for the first and last entry and on GetLog for any.
type RaftStore struct {
	db  *pebble.DB
	dir string
	fs  io.Closer // stops the disk health checker that wraps the file system

	// life is held shared by every call and exclusively by Close, so that Close waits for calls in
	// progress.
	life   sync.RWMutex
	closed bool // guarded by life

	// writeMu serializes the log's writers across their synced commit, so that each computes its bounds
	// from the previous one's. Readers never wait for it.
	writeMu sync.Mutex
	keyBuf  []byte // guarded by writeMu
	valBuf  []byte // guarded by writeMu

	// boundsMu guards bounds, which a writer updates, holding writeMu, once its commit is done.
	boundsMu sync.RWMutex
	bounds   raftBounds
}

// raftBounds are the first and last log index present; both are 0 when the log is empty.
type raftBounds struct {
	first, last uint64
}

var (
	_ raft.LogStore    = (*RaftStore)(nil)
	_ raft.StableStore = (*RaftStore)(nil)
)

// OpenRaftStore opens (or creates) the raft store in dir, which must not be the op-log store's. Errors
// are classified as OpenPebble's are: damage wraps ErrCorrupt, and so does a database holding keys this
// store does not write.
func OpenRaftStore(dir string, opts PebbleOptions) (*RaftStore, error) {
	db, fsCloser, err := openDB(dir, opts)
	if err != nil {
		return nil, err
	}
	s := &RaftStore{db: db, dir: dir, fs: fsCloser}
	if s.bounds, err = loadRaftBounds(db); err != nil {
		_ = db.Close()
		_ = fsCloser.Close()
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return s, nil
}

// enter holds the store open for one call, to be released with exit. Once Close has begun it returns
// ErrClosed and holds nothing.
func (s *RaftStore) enter() error {
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *RaftStore) exit() { s.life.RUnlock() }

// FirstIndex implements raft.LogStore: the lowest index present, 0 when the log is empty.
func (s *RaftStore) FirstIndex() (uint64, error) {
	b, err := s.currentBounds()
	return b.first, err
}

// LastIndex implements raft.LogStore: the highest index present, 0 when the log is empty.
func (s *RaftStore) LastIndex() (uint64, error) {
	b, err := s.currentBounds()
	return b.last, err
}

func (s *RaftStore) currentBounds() (raftBounds, error) {
	if err := s.enter(); err != nil {
		return raftBounds{}, err
	}
	defer s.exit()
	s.boundsMu.RLock()
	defer s.boundsMu.RUnlock()
	return s.bounds, nil
}

// GetLog implements raft.LogStore. A missing index returns raft.ErrLogNotFound.
func (s *RaftStore) GetLog(index uint64, log *raft.Log) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	v, closer, err := s.db.Get(raftLogKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return storageError(fmt.Sprintf("read raft log %d", index), err)
	}
	defer closer.Close()
	return decodeStoredRaftLog(index, v, log)
}

// StoreLog implements raft.LogStore.
func (s *RaftStore) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs implements raft.LogStore: all of logs in one synced batch. Gaps are allowed, as raft leaves
// one after restoring a snapshot, and an entry already present at an index is replaced. Index 0, which
// the bounds cannot tell from an empty log, is refused.
func (s *RaftStore) StoreLogs(logs []*raft.Log) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if len(logs) == 0 {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	batch := s.db.NewBatch()
	defer batch.Close()
	lo, hi, err := s.batchLogs(batch, logs)
	if err != nil {
		return err
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return storageError(fmt.Sprintf("store raft logs %d-%d", lo, hi), err)
	}
	s.setBounds(s.bounds.grown(lo, hi))
	return nil
}

// batchLogs adds logs to batch and returns their lowest and highest index.
func (s *RaftStore) batchLogs(batch *pebble.Batch, logs []*raft.Log) (lo, hi uint64, err error) {
	lo = math.MaxUint64
	for _, l := range logs {
		if l.Index == 0 {
			return 0, 0, errors.New("durability: raft log index 0")
		}
		s.keyBuf = appendRaftLogKey(s.keyBuf[:0], l.Index)
		s.valBuf = appendRaftLog(s.valBuf[:0], l)
		if err := batch.Set(s.keyBuf, s.valBuf, nil); err != nil {
			return 0, 0, storageError(fmt.Sprintf("store raft log %d", l.Index), err)
		}
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}
	return lo, hi, nil
}

// grown returns the bounds once entries lo through hi (possibly with gaps) are present too.
func (b raftBounds) grown(lo, hi uint64) raftBounds {
	if b.first == 0 {
		return raftBounds{first: lo, last: hi}
	}
	return raftBounds{first: min(b.first, lo), last: max(b.last, hi)}
}

// DeleteRange implements raft.LogStore: one synced range deletion of the indexes lo through hi, both
// included. Raft uses it to compact the head of the log after a snapshot and to cut a conflicting tail.
// The bounds are found again by seeking, so they stay exact when the log has gaps.
func (s *RaftStore) DeleteRange(lo, hi uint64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if lo > hi {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	upper := append(raftLogKey(hi), 0) // the key right after index hi
	if err := s.db.DeleteRange(raftLogKey(lo), upper, pebble.Sync); err != nil {
		return storageError(fmt.Sprintf("delete raft logs %d-%d", lo, hi), err)
	}
	b, err := loadRaftBounds(s.db)
	if err != nil {
		return err
	}
	s.setBounds(b)
	return nil
}

func (s *RaftStore) setBounds(b raftBounds) {
	s.boundsMu.Lock()
	s.bounds = b
	s.boundsMu.Unlock()
}

// Set implements raft.StableStore, synced.
func (s *RaftStore) Set(key, val []byte) error {
	return s.setStable(key, val)
}

// SetUint64 implements raft.StableStore, synced. The value shares Set's key space.
func (s *RaftStore) SetUint64(key []byte, val uint64) error {
	return s.setStable(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *RaftStore) setStable(key, val []byte) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if err := s.db.Set(raftStableKey(key), val, pebble.Sync); err != nil {
		return storageError(fmt.Sprintf("set raft key %q", key), err)
	}
	return nil
}

// Get implements raft.StableStore. The value is a copy, empty but not nil when set empty. A key never
// set returns an error whose message is exactly "not found", which raft takes for an unset key.
func (s *RaftStore) Get(key []byte) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	return s.getStable(key)
}

// GetUint64 implements raft.StableStore. A key never set returns 0 and the "not found" error of Get. A
// value that is not 8 bytes is an error wrapping ErrCorrupt.
func (s *RaftStore) GetUint64(key []byte) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.exit()
	v, err := s.getStable(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, corrupt(fmt.Sprintf("raft key %q: uint64 value of %d bytes", key, len(v)), nil)
	}
	return binary.BigEndian.Uint64(v), nil
}

func (s *RaftStore) getStable(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(raftStableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errStableNotFound
	}
	if err != nil {
		return nil, storageError(fmt.Sprintf("get raft key %q", key), err)
	}
	defer closer.Close()
	return append(make([]byte, 0, len(v)), v...), nil
}

// Close waits for calls in progress, then closes Pebble, which syncs its WAL. Later calls return
// ErrClosed; closing again returns nil.
func (s *RaftStore) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.db.Close()
	_ = s.fs.Close()
	if err != nil {
		return storageError("close "+s.dir, err)
	}
	return nil
}

// loadRaftBounds finds the first and last log entry with three seeks. On the way it checks that the
// database's first and last key have one of the store's prefixes, so that every key does, and that
// both entries decode under their keys.
func loadRaftBounds(db *pebble.DB) (raftBounds, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return raftBounds{}, storageError("seek raft log bounds", err)
	}
	b, err := seekRaftBounds(it)
	if cerr := it.Close(); err == nil && cerr != nil {
		err = storageError("seek raft log bounds", cerr)
	}
	return b, err
}

func seekRaftBounds(it *pebble.Iterator) (raftBounds, error) {
	if !it.First() {
		return raftBounds{}, iterError(it)
	}
	if err := checkRaftPrefix(it.Key()); err != nil {
		return raftBounds{}, err
	}
	if !it.Last() {
		return raftBounds{}, iterError(it)
	}
	if err := checkRaftPrefix(it.Key()); err != nil {
		return raftBounds{}, err
	}
	if it.Key()[0] != raftLogPrefix {
		return raftBounds{}, nil // only stable values, no log entries
	}
	last, err := storedRaftIndex(it)
	if err != nil {
		return raftBounds{}, err
	}
	if !it.SeekGE([]byte{raftLogPrefix}) {
		return raftBounds{}, iterError(it)
	}
	first, err := storedRaftIndex(it)
	if err != nil {
		return raftBounds{}, err
	}
	return raftBounds{first: first, last: last}, nil
}

// iterError is the error of an iterator that stopped, if any.
func iterError(it *pebble.Iterator) error {
	if err := it.Error(); err != nil {
		return storageError("seek raft log bounds", err)
	}
	return nil
}

func checkRaftPrefix(k []byte) error {
	if len(k) == 0 || (k[0] != raftStablePrefix && k[0] != raftLogPrefix) {
		return corrupt(fmt.Sprintf("key %x is not a raft store key", k), nil)
	}
	return nil
}

// storedRaftIndex returns the index of the entry at it, once checked to decode and to hold that index.
func storedRaftIndex(it *pebble.Iterator) (uint64, error) {
	index, err := parseRaftLogKey(it.Key())
	if err != nil {
		return 0, err
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return 0, storageError(fmt.Sprintf("read raft log %d", index), err)
	}
	var l raft.Log
	if err := decodeStoredRaftLog(index, v, &l); err != nil {
		return 0, err
	}
	return index, nil
}

// decodeStoredRaftLog decodes the value stored under index's key into log, which it leaves alone on
// failure.
func decodeStoredRaftLog(index uint64, v []byte, log *raft.Log) error {
	var l raft.Log
	if err := decodeRaftLog(v, &l); err != nil {
		return fmt.Errorf("raft log %d: %w", index, err)
	}
	if l.Index != index {
		return corrupt(fmt.Sprintf("raft log %d: value holds index %d", index, l.Index), nil)
	}
	*log = l
	return nil
}

func appendRaftLogKey(dst []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, raftLogPrefix), index)
}

func raftLogKey(index uint64) []byte {
	return appendRaftLogKey(make([]byte, 0, raftLogKeyLen), index)
}

func parseRaftLogKey(k []byte) (uint64, error) {
	if len(k) != raftLogKeyLen || k[0] != raftLogPrefix {
		return 0, corrupt(fmt.Sprintf("malformed raft log key %x", k), nil)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

func raftStableKey(key []byte) []byte {
	return append(append(make([]byte, 0, 1+len(key)), raftStablePrefix), key...)
}
