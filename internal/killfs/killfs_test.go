package killfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestKillFreezesTheDisk checks that after Kill nothing reaches the disk, while the program can still
// write, create, read back and rename files as if nothing happened.
func TestKillFreezesTheDisk(t *testing.T) {
	dir := t.TempDir()
	var sw Switch
	fs := FS(vfs.Default, &sw)
	path := func(name string) string { return filepath.Join(dir, name) }

	f, err := fs.Create(path("a"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "before ")
	sw.Kill()
	mustWrite(t, f, "after")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	g, err := fs.Create(path("b"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, "ghost")
	g.Close()
	if r, err := fs.Open(path("b")); err != nil {
		t.Fatalf("a file created after the kill cannot be opened by the program: %v", err)
	} else {
		r.Close()
	}
	if err := fs.Rename(path("a"), path("c")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove(path("a")); err != nil {
		t.Fatal(err)
	}

	if b, err := os.ReadFile(path("a")); err != nil || string(b) != "before " {
		t.Fatalf("disk holds %q (%v), want what was written before the kill", b, err)
	}
	for _, name := range []string{"b", "c"} {
		if _, err := os.Stat(path(name)); !os.IsNotExist(err) {
			t.Fatalf("%s reached the disk after the kill (%v)", name, err)
		}
	}
}

func mustWrite(t *testing.T, f vfs.File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}
