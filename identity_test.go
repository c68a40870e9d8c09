package zaris

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataDirIdentity checks that a data dir keeps the server identity it was given for the life of the
// directory, and refuses another node or a damaged record.
func TestDataDirIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	first, err := loadIdentity(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	again, err := loadIdentity(dir, "a")
	if err != nil || again != first {
		t.Fatalf("reloaded identity %+v (%v), want %+v", again, err, first)
	}
	if _, err := loadIdentity(dir, "b"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("another node took the data dir over: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, identityFile), []byte("zaris data dir 1\nname a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadIdentity(dir, "a"); err == nil {
		t.Fatal("a damaged identity was accepted")
	}
}

// TestDataDirIsPrivate checks that a new data dir is its owner's alone (0700, the identity file 0600),
// and that an existing one open to others is closed to them.
func TestDataDirIsPrivate(t *testing.T) {
	root := t.TempDir()
	fresh, open := filepath.Join(root, "fresh"), filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for _, dir := range []string{fresh, open} {
		if _, err := loadIdentity(dir, "a"); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, identityFile): 0o600} {
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got&^want != 0 {
				t.Errorf("%s has mode %v, want at most %v", path, got, want)
			}
		}
	}
}

// FuzzParseIdentity checks that the identity parser never panics and that whatever it accepts encodes
// back to the same bytes.
func FuzzParseIdentity(f *testing.F) {
	f.Add(dataIdentity{Name: "node-1", Server: 0xbeef}.encode())
	f.Add([]byte("zaris data dir 1\nname a\nserver 0\n"))
	f.Add([]byte("zaris data dir 1\nname \nserver zz\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseIdentity(b)
		if err != nil {
			return
		}
		if got := string(d.encode()); got != string(b) {
			t.Fatalf("parsed %+v from %q, which encodes to %q", d, b, got)
		}
	})
}

// TestDataDirOfNewerFormatRefused checks that a data dir written in a newer format than this release reads
// is refused with both formats named, by loadIdentity and by Join, and left as it was.
func TestDataDirOfNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	newer := []byte("zaris data dir 2\nname node-0\nserver 1f\n")
	path := filepath.Join(dir, identityFile)
	if err := os.WriteFile(path, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadIdentity(dir, "node-0")
	if !errors.Is(err, ErrIncompatibleVersion) || !strings.Contains(err.Error(), "format 2") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("loadIdentity of a newer format: %v", err)
	}
	cfg := testConfig("node-0")
	cfg.DataDir = dir
	cfg.GossipAddr, cfg.DataAddr = "127.0.0.1:0", "127.0.0.1:0"
	if n, err := Join(bg(t), cfg); !errors.Is(err, ErrIncompatibleVersion) {
		if n != nil {
			n.Close()
		}
		t.Fatalf("Join on a data dir of a newer format: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(newer) {
		t.Fatalf("the refused data dir's identity was rewritten: %q", got)
	}
}
