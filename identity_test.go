package zaris

import (
	"errors"
	"os"
	"path/filepath"
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
