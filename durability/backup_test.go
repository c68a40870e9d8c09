package durability

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeTestBackup writes a backup of segments segments, each with entries entries in pieces of 3.
func writeTestBackup(t *testing.T, dir string, segments, entries int) BackupManifest {
	t.Helper()
	w, err := CreateBackup(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := BackupManifest{Release: "test", Cluster: "c", TakenAt: time.Unix(1700000000, 0).UTC(), Partitions: 1}
	var fw *FileWriter
	for seg := range segments {
		if seg%2 == 0 { // two segments a file
			if fw != nil {
				if err := fw.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if fw, err = w.File(fmt.Sprintf("f%d", seg/2)); err != nil {
				t.Fatal(err)
			}
		}
		sw := fw.Segment(uint32(seg), uint64(100+seg))
		var piece []Entry
		for i := range entries {
			piece = append(piece, Entry{Key: fmt.Sprintf("k%d-%d", seg, i), Value: []byte{byte(i)}, Version: uint64(i + 1), ExpireAt: int64(i)})
			if len(piece) == 3 || i == entries-1 {
				if err := sw.Write(piece); err != nil {
					t.Fatal(err)
				}
				piece = nil
			}
		}
		m.Segments = append(m.Segments, sw.End())
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBackupRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	writeTestBackup(t, dir, 4, 10)
	b, err := OpenBackup(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	m := b.Manifest()
	if m.Keys() != 40 || len(m.Segments) != 4 || m.Format != BackupFormat || m.Segments[2].Revision != 102 {
		t.Fatalf("manifest %+v", m)
	}
	var keys []string
	if err := b.ReadSegment(2, func(p *Snapshot) error {
		for _, e := range p.Entries {
			keys = append(keys, e.Key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 10 || keys[0] != "k2-0" || keys[9] != "k2-9" {
		t.Fatalf("segment 2 read back %q", keys)
	}
	if _, err := CreateBackup(dir); err == nil {
		t.Fatal("a backup was started in a directory that holds one")
	}
}

// TestBackupDamageRefused damages a backup in each way a disk or an operator can, and checks that each is
// refused with ErrBadBackup by OpenBackup or Verify, naming the file.
func TestBackupDamageRefused(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"flipped byte in a segment", func(t *testing.T, dir string) { flipByte(t, dataFile(dir, "f0"), 20) }, "segments/f0, segment 0"},
		{"flipped byte in a second segment", func(t *testing.T, dir string) { flipByte(t, dataFile(dir, "f0"), 150) }, "segments/f0"},
		{"flipped byte in the manifest", func(t *testing.T, dir string) { flipByte(t, filepath.Join(dir, manifestName), 30) }, "checksum"},
		{"missing segment file", func(t *testing.T, dir string) { os.Remove(dataFile(dir, "f1")) }, "segment 2"},
		{"missing manifest", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, manifestName)) }, "did not finish"},
		{"truncated file", func(t *testing.T, dir string) { truncate(t, dataFile(dir, "f0"), 7) }, "segments/f0"},
		{"file swapped for another", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(dataFile(dir, "f0"))
			os.WriteFile(dataFile(dir, "f1"), b, 0o644)
		}, "segments/f1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			writeTestBackup(t, dir, 3, 8)
			c.damage(t, dir)
			b, err := OpenBackup(dir)
			if err == nil {
				err = b.Verify()
			}
			if !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrBadBackup naming %q", err, c.want)
			}
		})
	}
}

func flipByte(t *testing.T, name string, at int) {
	b, err := os.ReadFile(name)
	if err != nil || len(b) <= at {
		t.Fatalf("%s: %d bytes, %v", name, len(b), err)
	}
	b[at] ^= 0x40
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, name string, n int64) {
	if err := os.Truncate(name, n); err != nil {
		t.Fatal(err)
	}
}

// FuzzBackupPieces checks that the segment file reader never panics, fails only with ErrBadBackup, and
// that what it accepts reads back the same once written again.
func FuzzBackupPieces(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "b")
	w, _ := CreateBackup(dir)
	fw, _ := w.File("f")
	sw := fw.Segment(0, 9)
	sw.Write([]Entry{{Key: "a", Value: []byte("x"), Version: 3}, {Key: "h", Value: []byte{1, 2}, Kind: 2}})
	sw.Write(nil)
	fw.Close()
	seed, _ := os.ReadFile(dataFile(dir, "f"))
	f.Add(seed)
	f.Add([]byte{0, 0, 0, 1, 0x90})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var pieces [][]Entry
		err := readPieces(bytes.NewReader(b), int64(len(b)), func(p *Snapshot) error {
			pieces = append(pieces, slices.Clone(p.Entries))
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrBadBackup) {
				t.Fatalf("error %v is not ErrBadBackup", err)
			}
			return
		}
		var again []byte
		for _, p := range pieces {
			enc := AppendSnapshot(nil, &Snapshot{Entries: p})
			again = append(again, byte(len(enc)>>24), byte(len(enc)>>16), byte(len(enc)>>8), byte(len(enc)))
			again = append(again, enc...)
		}
		i := 0
		if err := readPieces(bytes.NewReader(again), int64(len(again)), func(p *Snapshot) error {
			if len(p.Entries) != len(pieces[i]) {
				t.Fatalf("piece %d: %d entries, then %d", i, len(pieces[i]), len(p.Entries))
			}
			i++
			return nil
		}); err != nil {
			t.Fatalf("re-encoded pieces refused: %v", err)
		}
	})
}
