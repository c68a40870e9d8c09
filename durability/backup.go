package durability

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A backup is a directory: data files under segments/, each holding one or more segments one after the
// other, and a MANIFEST that lists every segment with its file, offset, size, revision and SHA-256
// checksum. A segment is a sequence of pieces, each a 4-byte big-endian length and an AppendSnapshot
// encoding of part of the segment's entries, all at the segment's revision.
// The MANIFEST is its JSON body followed by one line, "sha256 " and the hex checksum of the body. It is
// written last, so a directory without one is a backup that did not finish.

// BackupFormat numbers the layout of the backup directories this release writes and reads.
const BackupFormat = 1

// ErrBadBackup: a backup directory is incomplete, damaged, or of a format this release does not read. The
// error names the file and what is wrong with it.
var ErrBadBackup = errors.New("durability: bad backup")

const (
	manifestName  = "MANIFEST"
	segmentsDir   = "segments"
	checksumLabel = "sha256 "
	// MaxBackupPiece bounds one piece of a segment, which a reader holds whole: at least one entry of the
	// largest value a node takes.
	MaxBackupPiece = 1 << 30
	// fileBuffer is the buffer of a segment file being written or read.
	fileBuffer = 64 << 10
	// maxManifestBytes bounds the MANIFEST a reader accepts: a few hundred bytes per segment.
	maxManifestBytes = 64 << 20
)

// BackupManifest describes a backup.
type BackupManifest struct {
	Format   int       `json:"format"`
	Release  string    `json:"release"`  // the release that wrote it
	Cluster  string    `json:"cluster"`  // the cluster's name
	TakenAt  time.Time `json:"taken_at"` // when the backup began; intents' TTLs count from it
	Protocol int       `json:"protocol"` // the cluster's protocol at the time
	// Partitions and the length of Segments are the layout of the cluster backed up.
	Partitions int             `json:"partitions"`
	MapVersion uint64          `json:"map_version"`
	Segments   []BackupSegment `json:"segments"` // by segment number, every one of the layout
}

// BackupSegment describes one segment of a backup: where it lies in which file, and what it holds.
type BackupSegment struct {
	Segment  uint32 `json:"segment"`
	Revision uint64 `json:"revision"`
	Entries  int64  `json:"entries"`
	File     string `json:"file"` // under segments/
	Offset   int64  `json:"offset"`
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
}

// Keys counts the entries of the backup's segments.
func (m *BackupManifest) Keys() int64 {
	var n int64
	for i := range m.Segments {
		n += m.Segments[i].Entries
	}
	return n
}

// Bytes counts the bytes of the backup's segment files.
func (m *BackupManifest) Bytes() int64 {
	var n int64
	for i := range m.Segments {
		n += m.Segments[i].Bytes
	}
	return n
}

func badBackup(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
}

func dataFile(dir, name string) string { return filepath.Join(dir, segmentsDir, name) }

// BackupWriter writes a backup directory.
type BackupWriter struct {
	dir string
}

// CreateBackup starts a backup in dir, which must not exist: it is created, with its parents, and Abort
// removes it, so a backup never writes into or removes a directory it did not make.
func CreateBackup(dir string) (*BackupWriter, error) {
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return nil, fmt.Errorf("durability: create backup directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("durability: create backup directory: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, segmentsDir), 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("durability: create backup directory: %w", err)
	}
	return &BackupWriter{dir: dir}, nil
}

// File starts data file name, which holds the segments its writer starts, one after the other.
func (w *BackupWriter) File(name string) (*FileWriter, error) {
	if name == "" || filepath.Base(name) != name || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("durability: backup file name %q", name)
	}
	f, err := os.OpenFile(dataFile(w.dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("durability: backup file %s: %w", name, err)
	}
	fw := &FileWriter{f: f, name: name}
	fw.w = bufio.NewWriterSize(f, fileBuffer)
	return fw, nil
}

// Finish writes the manifest, which makes the backup whole.
func (w *BackupWriter) Finish(m BackupManifest) error {
	m.Format = BackupFormat
	body, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	body = append(body, '\n')
	body = append(body, checksumLabel+hex.EncodeToString(sum[:])+"\n"...)
	tmp := filepath.Join(w.dir, manifestName+".tmp")
	if err := writeSynced(tmp, body); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, manifestName)); err != nil {
		return err
	}
	return syncDir(w.dir)
}

// Abort removes what the backup wrote.
func (w *BackupWriter) Abort() error { return os.RemoveAll(w.dir) }

func writeSynced(name string, b []byte) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Sync(), f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// FileWriter writes one data file of a backup.
type FileWriter struct {
	f    *os.File
	w    *bufio.Writer
	name string
	off  int64
	err  error
}

// Segment starts segment seg at the end of the file; every piece of it is at revision. The file's
// segments are written one at a time.
func (fw *FileWriter) Segment(seg uint32, revision uint64) *SegmentWriter {
	return &SegmentWriter{fw: fw, sum: sha256.New(), desc: BackupSegment{Segment: seg, Revision: revision, File: fw.name, Offset: fw.off}}
}

// Close flushes and syncs the file.
func (fw *FileWriter) Close() error {
	return errors.Join(fw.err, fw.w.Flush(), fw.f.Sync(), fw.f.Close())
}

// SegmentWriter writes one segment into its file, a piece at a time.
type SegmentWriter struct {
	fw   *FileWriter
	sum  hash.Hash
	desc BackupSegment
	buf  []byte
}

// Write adds a piece holding entries.
func (s *SegmentWriter) Write(entries []Entry) error {
	s.buf = AppendSnapshot(append(s.buf[:0], 0, 0, 0, 0), &Snapshot{Segment: s.desc.Segment, Revision: s.desc.Revision, Entries: entries})
	if len(s.buf)-4 > MaxBackupPiece {
		return fmt.Errorf("durability: backup piece of %d bytes, limit %d", len(s.buf)-4, MaxBackupPiece)
	}
	binary.BigEndian.PutUint32(s.buf, uint32(len(s.buf)-4))
	if _, err := s.fw.w.Write(s.buf); err != nil {
		s.fw.err = err
		return err
	}
	s.sum.Write(s.buf)
	s.fw.off += int64(len(s.buf))
	s.desc.Entries += int64(len(entries))
	s.desc.Bytes += int64(len(s.buf))
	return nil
}

// End ends the segment and describes it.
func (s *SegmentWriter) End() BackupSegment {
	s.desc.SHA256 = hex.EncodeToString(s.sum.Sum(nil))
	return s.desc
}

// Backup is a backup directory opened for reading.
type Backup struct {
	dir      string
	manifest BackupManifest
}

// OpenBackup reads and checks dir's manifest: its checksum, its format, and that it lists every segment of
// its layout once. It reads no segment file.
func OpenBackup(dir string) (*Backup, error) {
	raw, err := readBounded(filepath.Join(dir, manifestName), maxManifestBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, badBackup("%s has no %s: not a backup, or one that did not finish", dir, manifestName)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadBackup, manifestName, err)
	}
	m, err := parseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s in %s: %w", ErrBadBackup, manifestName, dir, err)
	}
	return &Backup{dir: dir, manifest: m}, nil
}

// parseManifest checks and decodes a MANIFEST's bytes.
func parseManifest(raw []byte) (BackupManifest, error) {
	var m BackupManifest
	cut := bytes.LastIndex(bytes.TrimRight(raw, "\n"), []byte("\n"+checksumLabel))
	if cut < 0 {
		return m, errors.New("no checksum line")
	}
	body, want := raw[:cut], strings.TrimSpace(string(raw[cut+1+len(checksumLabel):]))
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != want {
		return m, errors.New("checksum does not match its content")
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, err
	}
	if m.Format != BackupFormat {
		return m, fmt.Errorf("format %d, this release reads format %d", m.Format, BackupFormat)
	}
	if m.Partitions <= 0 || len(m.Segments) == 0 || len(m.Segments)%m.Partitions != 0 {
		return m, fmt.Errorf("layout of %d segments over %d partitions", len(m.Segments), m.Partitions)
	}
	for i := range m.Segments {
		s := &m.Segments[i]
		if s.Segment != uint32(i) {
			return m, fmt.Errorf("segment %d listed at position %d", s.Segment, i)
		}
		if s.Entries < 0 || s.Bytes < 0 || s.Offset < 0 || len(s.SHA256) != 2*sha256.Size || s.File == "" ||
			filepath.Base(s.File) != s.File || strings.HasPrefix(s.File, ".") {
			return m, fmt.Errorf("segment %d: file %q at %d, %d entries, %d bytes, checksum %q", i, s.File, s.Offset, s.Entries, s.Bytes, s.SHA256)
		}
	}
	return m, nil
}

func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	return b, err
}

// Manifest returns the backup's manifest.
func (b *Backup) Manifest() BackupManifest { return b.manifest }

// Verify reads every segment file whole: each must have the size and checksum its manifest gives, and
// decode into pieces of its segment and revision holding the entries counted.
func (b *Backup) Verify() error {
	for i := range b.manifest.Segments {
		if err := b.ReadSegment(uint32(i), func(*Snapshot) error { return nil }); err != nil {
			return err
		}
	}
	return nil
}

// ReadSegment passes each piece of segment seg to fn, in order. It fails with ErrBadBackup when the
// segment's file is missing, or the segment damaged or not what the manifest says, but only once its end is
// reached for a wrong checksum: a caller that must not act on damaged data runs Verify first.
func (b *Backup) ReadSegment(seg uint32, fn func(piece *Snapshot) error) error {
	if int(seg) >= len(b.manifest.Segments) {
		return badBackup("segment %d is not in the manifest", seg)
	}
	desc := b.manifest.Segments[seg]
	name := dataFile(b.dir, desc.File)
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("%w: segment %d: %w", ErrBadBackup, seg, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() < desc.Offset+desc.Bytes {
		return badBackup("%s: %d bytes, the manifest puts segment %d at %d to %d", name, sizeOf(st), seg, desc.Offset, desc.Offset+desc.Bytes)
	}
	sum := sha256.New()
	r := bufio.NewReaderSize(io.TeeReader(io.NewSectionReader(f, desc.Offset, desc.Bytes), sum), fileBuffer)
	var entries int64
	err = readPieces(r, desc.Bytes, func(p *Snapshot) error {
		if p.Segment != seg || p.Revision != desc.Revision {
			return badBackup("a piece of segment %d at revision %d", p.Segment, p.Revision)
		}
		entries += int64(len(p.Entries))
		return fn(p)
	})
	switch {
	case err != nil:
		return fmt.Errorf("%s, segment %d: %w", name, seg, err)
	case hex.EncodeToString(sum.Sum(nil)) != desc.SHA256:
		return badBackup("%s: segment %d's checksum does not match the manifest's", name, seg)
	case entries != desc.Entries:
		return badBackup("%s: segment %d has %d entries, the manifest says %d", name, seg, entries, desc.Entries)
	}
	return nil
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// readPieces decodes the pieces of a segment file of size bytes from r.
func readPieces(r io.Reader, size int64, fn func(p *Snapshot) error) error {
	var head [4]byte
	var buf []byte
	for size > 0 {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return badBackup("piece length: %v", err)
		}
		n := int64(binary.BigEndian.Uint32(head[:]))
		size -= 4
		if n > MaxBackupPiece || n > size {
			return badBackup("a piece of %d bytes with %d left in the file", n, size)
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return badBackup("piece: %v", err)
		}
		size -= n
		piece, err := DecodeSnapshot(buf)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadBackup, err)
		}
		if err := fn(&piece); err != nil {
			return err
		}
	}
	return nil
}
