package durability

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// openRaftStore opens the raft store in dir and closes it when the test ends.
func openRaftStore(t testing.TB, dir string) *RaftStore {
	t.Helper()
	s, err := OpenRaftStore(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopenRaftStore closes s and opens its directory again.
func reopenRaftStore(t testing.TB, s *RaftStore) *RaftStore {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openRaftStore(t, s.dir)
}

// raftLogs returns command entries [from, to] of term 1 with data that names their index.
func raftLogs(from, to uint64) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d", i),
			AppendedAt: time.Unix(1_700_000_000, int64(i))})
	}
	return logs
}

func mustStoreLogs(t testing.TB, s *RaftStore, logs []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

func mustGetLog(t testing.TB, s *RaftStore, index uint64) raft.Log {
	t.Helper()
	var l raft.Log
	if err := s.GetLog(index, &l); err != nil {
		t.Fatalf("GetLog(%d) = %v", index, err)
	}
	return l
}

func checkRaftBounds(t testing.TB, s *RaftStore, wantFirst, wantLast uint64) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first != wantFirst || last != wantLast {
		t.Fatalf("bounds [%d, %d], want [%d, %d]", first, last, wantFirst, wantLast)
	}
}

// checkRaftLogs checks that exactly the indexes in want, among those up to limit, are present, each with
// the entry raftLogs gives it.
func checkRaftLogs(t testing.TB, s *RaftStore, limit uint64, want func(uint64) bool) {
	t.Helper()
	for i := uint64(1); i <= limit; i++ {
		var l raft.Log
		err := s.GetLog(i, &l)
		switch {
		case !want(i) && !errors.Is(err, raft.ErrLogNotFound):
			t.Fatalf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
		case want(i) && err != nil:
			t.Fatalf("GetLog(%d) = %v", i, err)
		case want(i) && !sameRaftLog(l, *raftLogs(i, i)[0]):
			t.Fatalf("GetLog(%d) = %+v", i, l)
		}
	}
}

func TestRaftStoreRoundTrip(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	logs := codecRaftLogs()
	for i := range logs {
		if err := s.StoreLog(&logs[i]); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *RaftStore) {
		for _, want := range logs {
			if got := mustGetLog(t, s, want.Index); !sameRaftLog(got, want) {
				t.Fatalf("GetLog(%d) = %+v, want %+v", want.Index, got, want)
			}
		}
		checkRaftBounds(t, s, 1, math.MaxUint64)
	}
	check(s)
	check(reopenRaftStore(t, s))
}

func TestRaftStoreEmpty(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	checkRaftBounds(t, s, 0, 0)
	for _, index := range []uint64{0, 1, math.MaxUint64} {
		var l raft.Log
		if err := s.GetLog(index, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) of an empty log = %v, want ErrLogNotFound", index, err)
		}
	}
	if err := s.StoreLogs(nil); err != nil {
		t.Fatal(err)
	}
	checkRaftBounds(t, reopenRaftStore(t, s), 0, 0)
}

func TestRaftStoreLogsBatch(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	mustStoreLogs(t, s, raftLogs(1, 100))
	checkRaftBounds(t, s, 1, 100)
	mustStoreLogs(t, s, raftLogs(101, 164))
	checkRaftBounds(t, s, 1, 164)
	checkRaftLogs(t, s, 170, func(i uint64) bool { return i <= 164 })

	// A batch is all or nothing: one bad entry keeps the others out.
	bad := append(raftLogs(165, 170), &raft.Log{Index: 0})
	if err := s.StoreLogs(bad); err == nil {
		t.Fatal("StoreLogs of index 0 succeeded")
	}
	checkRaftBounds(t, s, 1, 164)
	checkRaftLogs(t, s, 170, func(i uint64) bool { return i <= 164 })
}

// TestRaftStoreDeleteRange deletes ranges as raft does, compaction at the head and conflict
// truncation at the tail, and some it does not, checking bounds and entries before and after a reopen.
func TestRaftStoreDeleteRange(t *testing.T) {
	all := func(uint64) bool { return true }
	cases := []struct {
		name        string
		stored      [][2]uint64 // runs of entries stored, in order
		lo, hi      uint64
		first, last uint64
		want        func(uint64) bool
	}{
		{"head", [][2]uint64{{1, 100}}, 1, 40, 41, 100, func(i uint64) bool { return i > 40 }},
		{"tail", [][2]uint64{{1, 100}}, 81, 100, 1, 80, func(i uint64) bool { return i <= 80 }},
		{"tail past the end", [][2]uint64{{1, 100}}, 81, math.MaxUint64, 1, 80, func(i uint64) bool { return i <= 80 }},
		{"middle", [][2]uint64{{1, 100}}, 41, 60, 1, 100, func(i uint64) bool { return i <= 40 || i > 60 }},
		{"everything", [][2]uint64{{1, 100}}, 1, 100, 0, 0, func(uint64) bool { return false }},
		{"everything, wide", [][2]uint64{{1, 100}}, 0, math.MaxUint64, 0, 0, func(uint64) bool { return false }},
		{"single", [][2]uint64{{1, 100}}, 100, 100, 1, 99, func(i uint64) bool { return i <= 99 }},
		{"empty range", [][2]uint64{{1, 100}}, 60, 59, 1, 100, all},
		{"outside", [][2]uint64{{1, 100}}, 200, 300, 1, 100, all},
		{"head across a gap", [][2]uint64{{1, 10}, {51, 100}}, 1, 30, 51, 100, func(i uint64) bool { return i > 50 }},
		{"tail across a gap", [][2]uint64{{1, 10}, {51, 100}}, 30, 100, 1, 10, func(i uint64) bool { return i <= 10 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openRaftStore(t, t.TempDir())
			for _, run := range c.stored {
				mustStoreLogs(t, s, raftLogs(run[0], run[1]))
			}
			if err := s.DeleteRange(c.lo, c.hi); err != nil {
				t.Fatal(err)
			}
			checkRaftBounds(t, s, c.first, c.last)
			checkRaftLogs(t, s, 110, func(i uint64) bool { return c.want(i) && stored(c.stored, i) })
			s = reopenRaftStore(t, s)
			checkRaftBounds(t, s, c.first, c.last)
			checkRaftLogs(t, s, 110, func(i uint64) bool { return c.want(i) && stored(c.stored, i) })
		})
	}
}

// stored reports whether index falls in one of runs.
func stored(runs [][2]uint64, index uint64) bool {
	return slices.ContainsFunc(runs, func(r [2]uint64) bool { return r[0] <= index && index <= r[1] })
}

// TestRaftStoreConflictTruncation replays a follower whose tail conflicts with the leader's: raft cuts
// the tail, then stores the leader's entries in its place.
func TestRaftStoreConflictTruncation(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	mustStoreLogs(t, s, raftLogs(1, 20))
	if err := s.DeleteRange(15, 20); err != nil {
		t.Fatal(err)
	}
	leader := raftLogs(15, 17)
	for _, l := range leader {
		l.Term = 2
	}
	mustStoreLogs(t, s, leader)
	check := func(s *RaftStore) {
		checkRaftBounds(t, s, 1, 17)
		if got := mustGetLog(t, s, 16); got.Term != 2 {
			t.Fatalf("entry 16 has term %d, want the leader's 2", got.Term)
		}
	}
	check(s)
	check(reopenRaftStore(t, s))
}

// TestRaftStoreNotFound checks the error raft relies on for unset stable keys: the message "not
// found", as raft's in-memory store gives for Get. Raft's NewRaft, HasExistingState and vote handling
// compare the message, not the error value.
func TestRaftStoreNotFound(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	key := []byte("CurrentTerm")
	_, inmemErr := raft.NewInmemStore().Get(key)
	if inmemErr == nil || inmemErr.Error() != "not found" {
		t.Fatalf("raft's in-memory Get of a missing key = %v; the contract has changed", inmemErr)
	}
	v, err := s.Get(key)
	if err == nil || err.Error() != inmemErr.Error() || v != nil {
		t.Fatalf("Get of a missing key = %q, %v; want nil, %q", v, err, inmemErr)
	}
	n, err := s.GetUint64(key)
	if err == nil || err.Error() != "not found" || n != 0 {
		t.Fatalf("GetUint64 of a missing key = %d, %v; want 0, \"not found\"", n, err)
	}
	has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore())
	if err != nil || has {
		t.Fatalf("HasExistingState of a fresh store = %v, %v; want false, nil", has, err)
	}
}

func TestRaftStoreStable(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	sets := []struct {
		key string
		val []byte
	}{
		{"LastVoteCand", []byte("node-1")},
		{"empty", []byte{}},
		{"nil", nil},
		{"", []byte("empty key")},
		{"\xff\xff", []byte{0, 1, 2}},
		{"LastVoteCand", []byte("node-2")}, // replaces node-1
	}
	for _, set := range sets {
		if err := s.Set([]byte(set.key), set.val); err != nil {
			t.Fatal(err)
		}
	}
	uints := map[string]uint64{"CurrentTerm": 7, "LastVoteTerm": 0, "max": math.MaxUint64}
	for k, v := range uints {
		if err := s.SetUint64([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	mustStoreLogs(t, s, raftLogs(1, 3)) // log entries do not show through the stable keys
	check := func(s *RaftStore) {
		want := map[string][]byte{"LastVoteCand": []byte("node-2"), "empty": {}, "nil": {}, "": []byte("empty key"),
			"\xff\xff": {0, 1, 2}}
		for k, wantVal := range want {
			got, err := s.Get([]byte(k))
			if err != nil || got == nil || !bytes.Equal(got, wantVal) {
				t.Fatalf("Get(%q) = %q, %v; want %q", k, got, err, wantVal)
			}
		}
		for k, wantVal := range uints {
			if got, err := s.GetUint64([]byte(k)); err != nil || got != wantVal {
				t.Fatalf("GetUint64(%q) = %d, %v; want %d", k, got, err, wantVal)
			}
		}
		if _, err := s.GetUint64([]byte("LastVoteCand")); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("GetUint64 of a 6-byte value = %v, want ErrCorrupt", err)
		}
	}
	check(s)
	check(reopenRaftStore(t, s))
}

func TestRaftStoreGetCopies(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	val := []byte("candidate")
	if err := s.Set([]byte("k"), val); err != nil {
		t.Fatal(err)
	}
	clear(val)
	got, err := s.Get([]byte("k"))
	if err != nil || string(got) != "candidate" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	clear(got)
	if again, _ := s.Get([]byte("k")); string(again) != "candidate" {
		t.Fatalf("Get after changing an earlier result = %q", again)
	}
}

func TestRaftStoreClosed(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	mustStoreLogs(t, s, raftLogs(1, 3))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	var l raft.Log
	calls := map[string]error{
		"StoreLog":    s.StoreLog(raftLogs(4, 4)[0]),
		"StoreLogs":   s.StoreLogs(raftLogs(4, 5)),
		"empty batch": s.StoreLogs(nil),
		"DeleteRange": s.DeleteRange(1, 2),
		"GetLog":      s.GetLog(1, &l),
		"Set":         s.Set([]byte("k"), []byte("v")),
		"SetUint64":   s.SetUint64([]byte("k"), 1),
	}
	_, calls["FirstIndex"] = s.FirstIndex()
	_, calls["LastIndex"] = s.LastIndex()
	_, calls["Get"] = s.Get([]byte("k"))
	_, calls["GetUint64"] = s.GetUint64([]byte("k"))
	for name, err := range calls {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// TestRaftStoreConcurrent has a writer append and compact the log, as raft's leader loop does, while
// readers fetch entries and bounds. Readers check each entry they get and that the bounds never go
// back.
func TestRaftStoreConcurrent(t *testing.T) {
	const (
		batches   = 30
		batchSize = 16
		readers   = 4
	)
	s := openRaftStore(t, t.TempDir())
	stop := make(chan struct{})
	errs := make(chan error, readers+1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(stop)
		for b := range uint64(batches) {
			if err := s.StoreLogs(raftLogs(b*batchSize+1, (b+1)*batchSize)); err != nil {
				errs <- err
				return
			}
			if b%5 == 4 {
				if err := s.DeleteRange(1, b*batchSize); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	for range readers {
		wg.Go(func() {
			if err := readRaftWhileWriting(s, stop); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkRaftBounds(t, s, (batches-1)*batchSize+1, batches*batchSize)
}

// readRaftWhileWriting reads the entries between the bounds until stop is closed.
func readRaftWhileWriting(s *RaftStore, stop <-chan struct{}) error {
	var lastSeen uint64
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		first, err := s.FirstIndex()
		if err != nil {
			return err
		}
		last, err := s.LastIndex()
		if err != nil {
			return err
		}
		if last < lastSeen {
			return fmt.Errorf("last index went back from %d to %d", lastSeen, last)
		}
		lastSeen = last
		for i := first; i != 0 && i <= last; i++ {
			var l raft.Log
			err := s.GetLog(i, &l)
			if errors.Is(err, raft.ErrLogNotFound) {
				continue // compacted since the bounds were read
			}
			if err != nil {
				return err
			}
			if !sameRaftLog(l, *raftLogs(i, i)[0]) {
				return fmt.Errorf("GetLog(%d) = %+v", i, l)
			}
		}
	}
}

// TestRaftStoreCloseWaits checks that Close waits for a call in progress, here one blocked by a writer
// that holds the write lock.
func TestRaftStoreCloseWaits(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	s.writeMu.Lock()
	stored := make(chan error, 1)
	go func() { stored <- s.StoreLogs(raftLogs(1, 1)) }()
	for s.life.TryLock() { // wait until StoreLogs holds the store open
		s.life.Unlock()
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v during a call", err)
	case <-time.After(20 * time.Millisecond):
	}
	s.writeMu.Unlock()
	if err := <-stored; err != nil {
		t.Fatalf("StoreLogs during Close = %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	checkRaftBounds(t, openRaftStore(t, s.dir), 1, 1)
}

func TestRaftStoreCorrupt(t *testing.T) {
	valid := func(index uint64) []byte { return appendRaftLog(nil, raftLogs(index, index)[0]) }
	cases := []struct {
		name    string
		damage  func(db *pebble.DB) error
		atOpen  bool
		atIndex uint64 // the GetLog that fails, when open does not
	}{
		{"last entry does not decode", func(db *pebble.DB) error {
			return db.Set(raftLogKey(10), []byte{raftLogVersion, 10}, nil)
		}, true, 0},
		{"first entry holds another index", func(db *pebble.DB) error {
			return db.Set(raftLogKey(1), valid(2), nil)
		}, true, 0},
		{"log key of the wrong length", func(db *pebble.DB) error {
			return db.Set(append(raftLogKey(11), 0), valid(11), nil)
		}, true, 0},
		{"key with a foreign prefix", func(db *pebble.DB) error {
			return db.Set([]byte("o-op-log"), nil, nil)
		}, true, 0},
		{"middle entry does not decode", func(db *pebble.DB) error {
			return db.Set(raftLogKey(5), []byte{9}, nil)
		}, false, 5},
		{"middle entry holds another index", func(db *pebble.DB) error {
			return db.Set(raftLogKey(6), valid(7), nil)
		}, false, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openRaftStore(t, dir)
			mustStoreLogs(t, s, raftLogs(1, 10))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			withRawPebble(t, dir, func(db *pebble.DB) {
				if err := c.damage(db); err != nil {
					t.Fatal(err)
				}
			})
			s, err := OpenRaftStore(dir, PebbleOptions{})
			if c.atOpen {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("open = %v, want ErrCorrupt naming the directory", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var l raft.Log
			if err := s.GetLog(c.atIndex, &l); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("GetLog(%d) = %v, want ErrCorrupt", c.atIndex, err)
			}
		})
	}
}

func TestRaftStoreOpenErrors(t *testing.T) {
	t.Run("op-log store", func(t *testing.T) {
		dir := t.TempDir()
		p := openPebble(t, dir)
		mustAppend(t, p, putOps(1, 1, 3))
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenRaftStore(dir, PebbleOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("opening the op-log store's directory = %v, want ErrCorrupt", err)
		}
	})
	t.Run("locked", func(t *testing.T) {
		dir := t.TempDir()
		openRaftStore(t, dir)
		_, err := OpenRaftStore(dir, PebbleOptions{})
		if err == nil || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("opening a locked directory = %v, want a plain error naming it", err)
		}
	})
}

// recordingFSM keeps the data of the commands raft applies to it.
type recordingFSM struct {
	mu      sync.Mutex
	applied []string
}

func (f *recordingFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, string(l.Data))
	return nil
}

func (f *recordingFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("recordingFSM takes no snapshots")
}

func (f *recordingFSM) Restore(io.ReadCloser) error {
	return errors.New("recordingFSM takes no snapshots")
}

func (f *recordingFSM) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

const testRaftID = "n1"

// startRaft runs a single-node raft on s with short timeouts.
func startRaft(t *testing.T, s *RaftStore, fsm raft.FSM) *raft.Raft {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = testRaftID
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	_, trans := raft.NewInmemTransport(testRaftID)
	r, err := raft.NewRaft(conf, fsm, s, s, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown() })
	return r
}

func waitLeader(t *testing.T, r *raft.Raft) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); r.State() != raft.Leader; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no leader after 30s: %v", r.State())
		}
	}
}

// TestRaftStoreRaftRestart runs raft on the store, shuts it down, and starts a new raft on the reopened
// store: it finds its term, log and configuration, needs no bootstrap, leads again and replays the
// commands.
func TestRaftStoreRaftRestart(t *testing.T) {
	s := openRaftStore(t, t.TempDir())
	r := startRaft(t, s, &recordingFSM{})
	boot := raft.Configuration{Servers: []raft.Server{{ID: testRaftID, Address: testRaftID}}}
	if err := r.BootstrapCluster(boot).Error(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	var commands []string
	for i := range 5 {
		commands = append(commands, fmt.Sprintf("command %d", i))
		if err := r.Apply([]byte(commands[i]), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	term, lastIndex := r.CurrentTerm(), r.LastIndex()
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}

	s = reopenRaftStore(t, s)
	if has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore()); err != nil || !has {
		t.Fatalf("HasExistingState after restart = %v, %v", has, err)
	}
	if got, err := s.GetUint64([]byte("CurrentTerm")); err != nil || got != term {
		t.Fatalf("stored term %d, %v; want %d", got, err, term)
	}
	checkRaftBounds(t, s, 1, lastIndex)

	fsm := &recordingFSM{}
	r = startRaft(t, s, fsm)
	if err := r.BootstrapCluster(boot).Error(); !errors.Is(err, raft.ErrCantBootstrap) {
		t.Fatalf("bootstrap after restart = %v, want ErrCantBootstrap", err)
	}
	waitLeader(t, r)
	if err := r.Barrier(time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if r.CurrentTerm() <= term || r.LastIndex() <= lastIndex {
		t.Fatalf("after restart: term %d, last index %d; want above %d and %d", r.CurrentTerm(), r.LastIndex(),
			term, lastIndex)
	}
	if got := fsm.commands(); !slices.Equal(got, commands) {
		t.Fatalf("replayed commands %q, want %q", got, commands)
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRaftStoreLogs measures StoreLogs of 1 and 64 entries of 100 bytes, fsynced and only handed to
// the operating system (NoFsync).
func BenchmarkRaftStoreLogs(b *testing.B) {
	for _, tc := range []struct {
		size    int
		noFsync bool
	}{{1, false}, {64, false}, {1, true}, {64, true}} {
		size := tc.size
		b.Run(fmt.Sprintf("entries=%d/fsync=%v", size, !tc.noFsync), func(b *testing.B) {
			s, err := OpenRaftStore(b.TempDir(), PebbleOptions{NoFsync: tc.noFsync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			logs := raftLogs(1, uint64(size))
			for _, l := range logs {
				l.Data = bytes.Repeat([]byte("v"), 100)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size * 100))
			for b.Loop() {
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
				for _, l := range logs {
					l.Index += uint64(size)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
