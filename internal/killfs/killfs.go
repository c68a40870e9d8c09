// Package killfs is a file system that can be killed: from the moment Kill is called, nothing more
// reaches the disk, as if the process had been SIGKILLed at that instant. Writes, syncs, new files,
// renames and removals after the kill succeed without effect, so the program goes on undisturbed while
// the disk keeps exactly what the kernel held at the kill. Tests use it to kill many in-process nodes at
// one instant and reopen their directories afterwards.
package killfs

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Switch kills every file system made with it at once.
type Switch struct{ dead atomic.Bool }

// Kill freezes the disk of every file system made with s.
func (s *Switch) Kill() { s.dead.Store(true) }

// Killed reports whether Kill was called.
func (s *Switch) Killed() bool { return s.dead.Load() }

// FS wraps base; once sw is killed, nothing reaches base's disk any more.
func FS(base vfs.FS, sw *Switch) vfs.FS {
	return &killFS{FS: base, sw: sw, ghost: vfs.NewMem(), ghosts: map[string]bool{}}
}

type killFS struct {
	vfs.FS
	sw *Switch

	// Files created after the kill live in ghost, so that the program can still use them.
	mu     sync.Mutex
	ghost  vfs.FS
	ghosts map[string]bool
}

func (fs *killFS) Unwrap() vfs.FS { return fs.FS }

func (fs *killFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.sw.Killed() {
		return fs.createGhost(name, category)
	}
	return fs.wrap(fs.FS.Create(name, category))
}

func (fs *killFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.sw.Killed() {
		return fs.createGhost(newname, category)
	}
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, category))
}

func (fs *killFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.isGhost(name) {
		return fs.ghost.OpenReadWrite(name, category, opts...)
	}
	return fs.wrap(fs.FS.OpenReadWrite(name, category, opts...))
}

func (fs *killFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.isGhost(name) {
		return fs.ghost.Open(name, opts...)
	}
	return fs.wrap(fs.FS.Open(name, opts...))
}

// createGhost creates name after the kill, in memory only.
func (fs *killFS) createGhost(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.ghost.MkdirAll(fs.ghost.PathDir(name), 0o755); err != nil {
		return nil, err
	}
	fs.ghosts[name] = true
	return fs.ghost.Create(name, category)
}

func (fs *killFS) isGhost(name string) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.ghosts[name]
}

func (fs *killFS) Stat(name string) (vfs.FileInfo, error) {
	if fs.isGhost(name) {
		return fs.ghost.Stat(name)
	}
	return fs.FS.Stat(name)
}

func (fs *killFS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs *killFS) Link(oldname, newname string) error {
	return fs.unlessKilled(func() error { return fs.FS.Link(oldname, newname) })
}

func (fs *killFS) Remove(name string) error {
	return fs.unlessKilled(func() error { return fs.FS.Remove(name) })
}

func (fs *killFS) RemoveAll(name string) error {
	return fs.unlessKilled(func() error { return fs.FS.RemoveAll(name) })
}

func (fs *killFS) Rename(oldname, newname string) error {
	return fs.unlessKilled(func() error { return fs.FS.Rename(oldname, newname) })
}

func (fs *killFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.unlessKilled(func() error { return fs.FS.MkdirAll(dir, perm) })
}

func (fs *killFS) unlessKilled(do func() error) error {
	if fs.sw.Killed() {
		return nil
	}
	return do()
}

func (fs *killFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &killFile{File: f, sw: fs.sw}, nil
}

// killFile is an open file whose changes stop reaching the disk at the kill.
type killFile struct {
	vfs.File
	sw *Switch
}

func (f *killFile) Write(p []byte) (int, error) {
	if f.sw.Killed() {
		return len(p), nil
	}
	return f.File.Write(p)
}

func (f *killFile) WriteAt(p []byte, off int64) (int, error) {
	if f.sw.Killed() {
		return len(p), nil
	}
	return f.File.WriteAt(p, off)
}

func (f *killFile) Preallocate(offset, length int64) error {
	if f.sw.Killed() {
		return nil
	}
	return f.File.Preallocate(offset, length)
}

func (f *killFile) Sync() error {
	if f.sw.Killed() {
		return nil
	}
	return f.File.Sync()
}

func (f *killFile) SyncData() error {
	if f.sw.Killed() {
		return nil
	}
	return f.File.SyncData()
}

func (f *killFile) SyncTo(length int64) (bool, error) {
	if f.sw.Killed() {
		return true, nil
	}
	return f.File.SyncTo(length)
}
