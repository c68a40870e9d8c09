package durability

import (
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walSyncCounter counts the syncs that reach the write-ahead log files of the file system beneath it.
type walSyncCounter struct {
	vfs.FS
	syncs *atomic.Int64
}

func (fs walSyncCounter) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(name, f, err)
}

func (fs walSyncCounter) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(newname, f, err)
}

func (fs walSyncCounter) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	return countedFile{File: f, syncs: fs.syncs}, nil
}

type countedFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f countedFile) Sync() error     { f.syncs.Add(1); return f.File.Sync() }
func (f countedFile) SyncData() error { f.syncs.Add(1); return f.File.SyncData() }
func (f countedFile) SyncTo(n int64) (bool, error) {
	f.syncs.Add(1)
	return f.File.SyncTo(n)
}

// TestPebbleNoFsync checks what Sync means with and without NoFsync. In both, an append alone may stay in
// the process (a copy of the directory, which is what a killed process leaves, need not hold it) and Sync
// puts every append in the kernel's hands (a copy holds it); only without NoFsync does the log reach
// stable storage (fsync).
func TestPebbleNoFsync(t *testing.T) {
	for _, noFsync := range []bool{true, false} {
		t.Run(map[bool]string{true: "no-fsync", false: "fsync"}[noFsync], func(t *testing.T) {
			var syncs atomic.Int64
			dir := t.TempDir()
			s, err := OpenPebble(dir, PebbleOptions{NoFsync: noFsync, FS: walSyncCounter{FS: vfs.Default, syncs: &syncs}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			base := syncs.Load()
			mustAppend(t, s, putOps(1, 1, 20)) // a few hundred bytes: less than one log block
			if _, last := copiedBounds(t, dir, 1); last != 0 {
				t.Fatalf("a copy taken before Sync holds revision %d: the test cannot tell handed-over writes apart", last)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			if _, last := copiedBounds(t, dir, 1); last != 20 {
				t.Fatalf("a copy taken after Sync ends at revision %d, want 20", last)
			}
			if got := syncs.Load() - base; noFsync != (got == 0) {
				t.Fatalf("NoFsync %v: %d syncs of the log reached the disk", noFsync, got)
			}
		})
	}
}

// copiedBounds copies dir, as a killed process leaves it, and returns the copy's bounds of segment.
func copiedBounds(t *testing.T, dir string, segment uint32) (first, last uint64) {
	t.Helper()
	c := openPebble(t, copyDir(t, dir))
	first, last, err := c.Bounds(segment)
	if err != nil {
		t.Fatal(err)
	}
	return first, last
}
