package durability

import (
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walNoFsyncFS is a file system on which syncing a write-ahead log file only hands its buffered bytes to
// the operating system: Pebble's sync path writes them out, and the flush to stable storage is skipped.
// A commit synced this way survives the process being killed, not the machine losing power. Every other
// file (tables, manifests) keeps its real syncs, so the store stays whole after a power loss and loses
// at most the log's tail.
type walNoFsyncFS struct{ vfs.FS }

// isWAL reports whether name is one of Pebble's write-ahead log files.
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs walNoFsyncFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noFsyncIfWAL(name)(fs.FS.Create(name, category))
}

func (fs walNoFsyncFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noFsyncIfWAL(newname)(fs.FS.ReuseForWrite(oldname, newname, category))
}

func (fs walNoFsyncFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return noFsyncIfWAL(name)(fs.FS.OpenReadWrite(name, category, opts...))
}

func (fs walNoFsyncFS) Unwrap() vfs.FS { return fs.FS }

// noFsyncIfWAL returns a wrapper of an opened file that skips its syncs when name is a log file.
func noFsyncIfWAL(name string) func(vfs.File, error) (vfs.File, error) {
	return func(f vfs.File, err error) (vfs.File, error) {
		if err != nil || !isWAL(name) {
			return f, err
		}
		return noFsyncFile{f}, nil
	}
}

// noFsyncFile is a file whose syncs return at once: what was written to it is already the kernel's.
type noFsyncFile struct{ vfs.File }

func (noFsyncFile) Sync() error                           { return nil }
func (noFsyncFile) SyncData() error                       { return nil }
func (noFsyncFile) SyncTo(int64) (fullSync bool, _ error) { return true, nil }

// privateFS is the operating system's file system, on which the files and directories a store creates are
// its owner's alone (0600 and 0700): they hold every value written.
type privateFS struct{ vfs.FS }

func (fs privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err == nil {
		if err = os.Chmod(name, 0o600); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, err
}

func (fs privateFS) MkdirAll(dir string, _ os.FileMode) error { return fs.FS.MkdirAll(dir, 0o700) }

func (fs privateFS) Lock(name string) (io.Closer, error) {
	lock, err := fs.FS.Lock(name)
	if err == nil {
		if err = os.Chmod(name, 0o600); err != nil {
			lock.Close()
			return nil, err
		}
	}
	return lock, err
}

func (fs privateFS) Unwrap() vfs.FS { return fs.FS }
