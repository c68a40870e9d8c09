package durability

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// storeState is everything a store reports about some segments.
type storeState struct {
	segments  []uint32
	bounds    map[uint32][2]uint64
	bytes     map[uint32]int64
	ops       map[uint32][]Op
	snapshots map[uint32]Snapshot
}

func captureState(t *testing.T, s Store) storeState {
	t.Helper()
	segs, err := s.Segments()
	if err != nil {
		t.Fatal(err)
	}
	st := storeState{segments: segs, bounds: map[uint32][2]uint64{}, bytes: map[uint32]int64{},
		ops: map[uint32][]Op{}, snapshots: map[uint32]Snapshot{}}
	for _, segment := range segs {
		first, last, err := s.Bounds(segment)
		if err != nil {
			t.Fatal(err)
		}
		st.bounds[segment] = [2]uint64{first, last}
		st.bytes[segment] = logBytes(t, s, segment)
		st.ops[segment] = mustOps(t, s, segment, max(first, 1)-1, 0)
		if snap, ok, err := s.LoadSnapshot(segment); err != nil {
			t.Fatal(err)
		} else if ok {
			st.snapshots[segment] = snap
		}
	}
	return st
}

func checkSameState(t *testing.T, got, want storeState) {
	t.Helper()
	if !slices.Equal(got.segments, want.segments) {
		t.Fatalf("segments %v, want %v", got.segments, want.segments)
	}
	for _, segment := range want.segments {
		if got.bounds[segment] != want.bounds[segment] {
			t.Fatalf("segment %d: bounds %v, want %v", segment, got.bounds[segment], want.bounds[segment])
		}
		if got.bytes[segment] != want.bytes[segment] {
			t.Fatalf("segment %d: LogBytes %d, want %d", segment, got.bytes[segment], want.bytes[segment])
		}
		checkOps(t, got.ops[segment], want.ops[segment])
		gs, gok := got.snapshots[segment]
		ws, wok := want.snapshots[segment]
		if gok != wok || !sameSnapshot(gs, ws) {
			t.Fatalf("segment %d: snapshot %v %+v, want %v %+v", segment, gok, gs, wok, ws)
		}
	}
}

// fillStore gives s a bit of everything: logs, a truncated log, an emptied one, a moved one, snapshots.
func fillStore(t *testing.T, s Store) {
	t.Helper()
	mustAppend(t, s, putOps(1, 1, 500))
	mustAppend(t, s, append(putOps(2, 1, 300), putOps(0xFFFFFFFF, 1, 10)...))
	mustTruncate(t, s, 2, 101)
	mustAppend(t, s, putOps(3, 1, 50))
	mustTruncate(t, s, 3, 51)
	mustTruncate(t, s, 4, 1001)
	for _, snap := range []Snapshot{testSnapshot(2, 100, 30), testSnapshot(4, 1000, 5), testSnapshot(6, 0, 0)} {
		if err := s.SaveSnapshot(&snap); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPebbleRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, s)
	before := captureState(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openPebble(t, dir)
	checkSameState(t, captureState(t, s), before)

	// The reopened logs go on where they stopped, emptied ones included.
	for segment, next := range map[uint32]uint64{1: 501, 2: 301, 3: 51, 4: 1001, 6: 1} {
		if err := s.Append([]Op{putOp(segment, next+1)}); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("segment %d: gap after restart = %v, want ErrOutOfOrder", segment, err)
		}
		mustAppend(t, s, []Op{putOp(segment, next)})
	}
	mustTruncate(t, s, 1, 400)
	checkBounds(t, s, 1, 400, 501)
	after := captureState(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkSameState(t, captureState(t, openPebble(t, dir)), after)
}

// TestPebbleResetSurvivesRestart resets segments of every shape, restarts some from scratch, and
// reopens the store: it must see the resets and resume each log where it stopped.
func TestPebbleResetSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, s)
	// A log; a truncated one with a snapshot; an emptied one; a moved one with a snapshot; a snapshot.
	for _, segment := range []uint32{1, 2, 3, 4, 6} {
		mustReset(t, s, segment)
	}
	mustAppend(t, s, putOps(1, 1, 20))
	mustSaveSnapshot(t, s, testSnapshot(2, 7, 3))
	mustTruncate(t, s, 2, 8)
	before := captureState(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openPebble(t, dir)
	checkSameState(t, captureState(t, s), before)
	checkSegments(t, s, 1, 2, 0xFFFFFFFF)
	for _, segment := range []uint32{3, 4, 6} {
		checkReset(t, s, segment)
	}
	for segment, next := range map[uint32]uint64{1: 21, 2: 8, 3: 1, 4: 1} {
		mustAppend(t, s, []Op{putOp(segment, next)})
	}
	checkBounds(t, s, 2, 8, 8)
}

// TestPebbleLogBytesExact checks LogBytes against the keys and values actually stored, across
// truncations and a restart.
func TestPebbleLogBytesExact(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, s)
	mustTruncate(t, s, 1, 250)
	want := map[uint32]int64{}
	for _, segment := range []uint32{1, 2, 3, 4, 0xFFFFFFFF} {
		want[segment] = logBytes(t, s, segment)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	withRawPebble(t, dir, func(db *pebble.DB) {
		for segment, n := range want {
			it, err := db.NewIter(&pebble.IterOptions{LowerBound: opKey(segment, 0), UpperBound: opSegmentUpper(segment)})
			if err != nil {
				t.Fatal(err)
			}
			var stored int64
			for ok := it.First(); ok; ok = it.Next() {
				stored += int64(len(it.Key()) + len(it.Value()))
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if stored != n {
				t.Errorf("segment %d: LogBytes %d, stored %d", segment, n, stored)
			}
		}
	})
	s = openPebble(t, dir)
	for segment, n := range want {
		if got := logBytes(t, s, segment); got != n {
			t.Errorf("segment %d: LogBytes %d after restart, %d before", segment, got, n)
		}
	}
}

// TestPebbleCrashAfterSync copies the directory of an open store, as a power cut would leave it, after
// Sync and after more unsynced appends. The copy must hold everything synced, and each log must be a
// prefix of what was appended.
func TestPebbleCrashAfterSync(t *testing.T) {
	dir := t.TempDir()
	s := openPebble(t, dir)
	mustAppend(t, s, putOps(1, 1, 300))
	mustAppend(t, s, putOps(2, 1, 300))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := copyDir(t, dir)
	for rev := uint64(301); rev <= 600; rev += 10 {
		mustAppend(t, s, putOps(1, rev, rev+9))
	}
	unsynced := copyDir(t, dir)

	for name, copied := range map[string]string{"synced": synced, "unsynced": unsynced} {
		t.Run(name, func(t *testing.T) {
			c := openPebble(t, copied)
			for _, segment := range []uint32{1, 2} {
				first, last, err := c.Bounds(segment)
				if err != nil {
					t.Fatal(err)
				}
				if first != 1 || last < 300 || last > 600 {
					t.Fatalf("segment %d: bounds (%d, %d) after a crash", segment, first, last)
				}
				checkOps(t, mustOps(t, c, segment, 0, 0), putOps(segment, 1, last))
			}
		})
	}
}

// copyDir copies the files of dir into a new directory, skipping Pebble's lock file.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// withRawPebble opens dir with Pebble directly, to damage what the store wrote.
func withRawPebble(t *testing.T, dir string, fn func(db *pebble.DB)) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{l: quiet}, EventListener: pebbleEvents(quiet)})
	if err != nil {
		t.Fatal(err)
	}
	fn(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// seedCorruptible writes segments 1..3 with 20 ops each and closes the store.
func seedCorruptible(t *testing.T, dir string) {
	t.Helper()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for segment := uint32(1); segment <= 3; segment++ {
		mustAppend(t, s, putOps(segment, 1, 20))
	}
	snap := testSnapshot(2, 20, 3)
	if err := s.SaveSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// storedValue is what the store writes for op at offset.
func storedValue(op Op, offset uint64) []byte {
	return AppendOp(binary.BigEndian.AppendUint64(nil, offset), &op)
}

// firstCorruptError opens dir and reads everything, returning the first error; it fails the test on
// an error that does not wrap ErrCorrupt or on no error at all.
func firstCorruptError(t *testing.T, dir string) error {
	t.Helper()
	err := readEverything(dir)
	if err == nil {
		t.Fatal("damage went unnoticed")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want an error wrapping ErrCorrupt", err)
	}
	return err
}

// readEverything opens dir and reads every log and snapshot, returning the first error.
func readEverything(dir string) error {
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	segs, err := s.Segments()
	if err != nil {
		return err
	}
	for _, segment := range segs {
		if _, err := s.Ops(segment, 0, 0); err != nil && !errors.Is(err, ErrTruncated) {
			return err
		}
		if _, _, err := s.LoadSnapshot(segment); err != nil {
			return err
		}
	}
	return nil
}

// TestPebbleCorruptRecords writes malformed records under the store's prefixes and checks that opening
// or reading reports ErrCorrupt naming the place, and which of the two does.
func TestPebbleCorruptRecords(t *testing.T) {
	offsetOf := func(db *pebble.DB, segment uint32, rev uint64) uint64 {
		v, closer, err := db.Get(opKey(segment, rev))
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		offset, _, _ := splitOpValue(segment, rev, v)
		return offset
	}
	tests := []struct {
		name    string
		damage  func(db *pebble.DB) error
		atOpen  bool   // whether OpenPebble itself fails
		mention string // what the error must name
	}{
		{"garbage op value", func(db *pebble.DB) error {
			return db.Set(opKey(2, 10), append(make([]byte, 8), "not msgpack"...), nil)
		}, false, "segment 2 revision 10"},
		{"op value cut short", func(db *pebble.DB) error {
			v := storedValue(putOp(2, 10), offsetOf(db, 2, 10))
			return db.Set(opKey(2, 10), v[:len(v)-3], nil)
		}, false, "segment 2 revision 10"},
		{"op value of another revision", func(db *pebble.DB) error {
			return db.Set(opKey(2, 10), storedValue(putOp(2, 11), offsetOf(db, 2, 10)), nil)
		}, false, "segment 2 revision 10"},
		{"op value without offset", func(db *pebble.DB) error {
			return db.Set(opKey(2, 20), []byte{1, 2, 3}, nil)
		}, true, "segment 2 revision 20"},
		{"revision missing", func(db *pebble.DB) error {
			return db.Delete(opKey(2, 10), nil)
		}, false, "segment 2: revision 10 missing"},
		{"head missing", func(db *pebble.DB) error {
			return db.Delete(opKey(2, 1), nil)
		}, true, "segment 2: log starts at revision 2"},
		{"far revision after the log", func(db *pebble.DB) error {
			far := uint64(1) << 60
			return db.Set(opKey(2, far), storedValue(putOp(2, far), offsetOf(db, 2, 20)+200), nil)
		}, true, "cannot fit"},
		{"revision after a gap at the end", func(db *pebble.DB) error {
			return db.Set(opKey(2, 30), storedValue(putOp(2, 30), offsetOf(db, 2, 20)+5000), nil)
		}, false, "segment 2: revision 21 missing"},
		{"stray key inside a log", func(db *pebble.DB) error {
			return db.Set(append(opKey(2, 10), 0), []byte("x"), nil)
		}, false, "malformed op key"},
		{"short op key", func(db *pebble.DB) error {
			return db.Set([]byte{opPrefix, 0, 0}, []byte("x"), nil)
		}, true, "malformed op key"},
		{"unknown prefix", func(db *pebble.DB) error {
			return db.Set([]byte("zzz"), []byte("x"), nil)
		}, true, "unexpected key"},
		{"malformed floor", func(db *pebble.DB) error {
			return db.Set(segmentKey(floorPrefix, 2), []byte{1}, nil)
		}, true, "segment 2: malformed truncation floor"},
		{"floor disagrees with log", func(db *pebble.DB) error {
			return db.Set(segmentKey(floorPrefix, 2), []byte{0, 0, 0, 0, 0, 0, 0, 5}, nil)
		}, true, "truncation floor is 5"},
		{"garbage snapshot", func(db *pebble.DB) error {
			return db.Set(segmentKey(snapshotPrefix, 2), []byte{0x94, 1, 2}, nil)
		}, false, "snapshot of segment 2"},
		{"snapshot of another segment", func(db *pebble.DB) error {
			snap := testSnapshot(3, 1, 1)
			return db.Set(segmentKey(snapshotPrefix, 2), AppendSnapshot(nil, &snap), nil)
		}, false, "snapshot of segment 2 holds segment 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			seedCorruptible(t, dir)
			withRawPebble(t, dir, func(db *pebble.DB) {
				if err := tt.damage(db); err != nil {
					t.Fatal(err)
				}
			})
			s, openErr := OpenPebble(dir, PebbleOptions{})
			if openErr == nil {
				s.Close()
			}
			if gotAtOpen := openErr != nil; gotAtOpen != tt.atOpen {
				t.Fatalf("OpenPebble error = %v, want an error at open: %v", openErr, tt.atOpen)
			}
			err := firstCorruptError(t, dir)
			if !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}

// TestPebbleCorruptFiles damages Pebble's files the way a failing disk or an interrupted copy would.
// Each case states whether the store refuses to open (ErrCorrupt), or opens with what it can still
// vouch for.
func TestPebbleCorruptFiles(t *testing.T) {
	tests := []struct {
		name    string
		flush   bool // move the data from the WAL into an sstable first
		damage  func(t *testing.T, dir string)
		corrupt bool // ErrCorrupt when true; otherwise the store opens and every log is a prefix
	}{
		{"sstable bytes flipped", true, func(t *testing.T, dir string) {
			for _, p := range glob(t, dir, "*.sst") {
				flipBytes(t, p, 0.25, 0.5)
			}
		}, true},
		{"sstable missing", true, func(t *testing.T, dir string) {
			for _, p := range glob(t, dir, "*.sst") {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}, true},
		{"MANIFEST bytes flipped", true, func(t *testing.T, dir string) {
			for _, p := range glob(t, dir, "MANIFEST-*") {
				flipBytes(t, p, 0.1, 1)
			}
		}, true},
		{"older WAL cut short", false, func(t *testing.T, dir string) {
			wals := glob(t, dir, "*.log")
			if len(wals) < 2 {
				t.Skip("a single WAL: nothing older to damage")
			}
			cutInHalf(t, wals[0])
		}, true},
		{"newest WAL cut short", false, func(t *testing.T, dir string) {
			wals := glob(t, dir, "*.log")
			cutInHalf(t, wals[len(wals)-1])
		}, false},
		{"newest WAL tail flipped", false, func(t *testing.T, dir string) {
			wals := glob(t, dir, "*.log")
			flipBytes(t, wals[len(wals)-1], 0.9, 1)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			seedLarge(t, dir, tt.flush)
			tt.damage(t, dir)
			if tt.corrupt {
				t.Log(firstCorruptError(t, dir))
				return
			}
			s := openPebble(t, dir)
			for segment := uint32(1); segment <= 3; segment++ {
				first, last, err := s.Bounds(segment)
				if err != nil {
					t.Fatal(err)
				}
				if last > 0 && first != 1 {
					t.Fatalf("segment %d: bounds (%d, %d)", segment, first, last)
				}
				checkOps(t, mustOps(t, s, segment, 0, 0), putOps(segment, 1, last)[:last])
			}
		})
	}
}

// seedLarge writes 2000 ops to each of segments 1..3, enough for several WALs.
func seedLarge(t *testing.T, dir string, flush bool) {
	t.Helper()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for segment := uint32(1); segment <= 3; segment++ {
		for rev := uint64(1); rev <= 2000; rev += 100 {
			mustAppend(t, s, putOps(segment, rev, rev+99))
		}
	}
	if flush {
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func glob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s in %s (%v)", pattern, dir, err)
	}
	slices.Sort(m)
	return m
}

// flipBytes inverts every 97th byte of the file between the fractions from and to of its length.
func flipBytes(t *testing.T, path string, from, to float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := int(float64(len(b)) * from); i < int(float64(len(b))*to); i += 97 {
		b[i] ^= 0xFF
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func cutInHalf(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, info.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func TestPebbleOpenErrors(t *testing.T) {
	t.Run("locked", func(t *testing.T) {
		dir := t.TempDir()
		openPebble(t, dir)
		_, err := OpenPebble(dir, PebbleOptions{})
		if err == nil || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("opening a locked directory = %v, want a plain error naming it", err)
		}
	})
	t.Run("file in the way", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenPebble(path, PebbleOptions{})
		if err == nil || errors.Is(err, ErrCorrupt) {
			t.Fatalf("opening a file as a directory = %v, want a plain error", err)
		}
	})
}

// TestPebbleLogger checks how Pebble's messages reach slog: quiet by default, routine ones at debug,
// fatal ones as a panic after logging.
func TestPebbleLogger(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := pebbleLogger{l: logger}
	l.Infof("opened %d", 1)
	l.Errorf("failed %s", "x")
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "broken 7") {
				t.Errorf("Fatalf recovered %v, want a panic naming the message", r)
			}
		}()
		l.Fatalf("broken %d", 7)
	}()
	out := buf.String()
	for _, want := range []string{"level=DEBUG msg=\"opened 1\"", "level=ERROR msg=\"failed x\"", "broken 7"} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %q:\n%s", want, out)
		}
	}

	// With a logger, Pebble's routine messages arrive at debug.
	buf.Reset()
	s, err := OpenPebble(t.TempDir(), PebbleOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "level=DEBUG msg=\"Found 0 WALs\"") {
		t.Errorf("opening did not log Pebble's WAL count at debug:\n%s", buf.String())
	}

	// Without one, nothing reaches the standard logger, which Pebble would use by default.
	var std lockedBuffer
	prev := log.Writer()
	log.SetOutput(&std)
	t.Cleanup(func() { log.SetOutput(prev) })
	quiet := openPebble(t, t.TempDir())
	mustAppend(t, quiet, putOps(1, 1, 3))
	if err := quiet.Close(); err != nil {
		t.Fatal(err)
	}
	if out := std.String(); out != "" {
		t.Fatalf("a store without a logger logged:\n%s", out)
	}
}

// lockedBuffer is a bytes.Buffer that background goroutines may write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPebbleFilesArePrivate checks that every file and directory a store creates is its owner's alone,
// whatever the process's umask: they hold every value written.
func TestPebbleFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v: open to others than its owner", path, perm)
		}
		seen++
		return nil
	})
	if err != nil || seen < 3 {
		t.Fatalf("walked %d files of the store: %v", seen, err)
	}
}
