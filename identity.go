package zaris

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A data directory belongs to one node for its whole life. Its identity file names that node and the
// control-plane server whose raft state (term, vote, log) the directory keeps, so that a restart from it
// rejoins the control plane as the same server, and a directory is never taken over under another name.

// The identity file's first line names the directory's format (DataDirFormat).
const (
	identityFile   = "identity"
	identityHeader = "zaris data dir "
)

// dataIdentity is what a data directory records of its node.
type dataIdentity struct {
	Name   NodeID
	Server uint64 // the incarnation in the raft server ID, fixed for the directory's life
}

// loadIdentity returns the identity recorded in dir, recording a new one for node id on first use. A
// directory recorded for another node is refused.
func loadIdentity(dir string, id NodeID) (dataIdentity, error) {
	if err := privateDir(dir); err != nil {
		return dataIdentity{}, err
	}
	path := filepath.Join(dir, identityFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createIdentity(dir, id)
	}
	if err != nil {
		return dataIdentity{}, fmt.Errorf("zaris: read %s: %w", path, err)
	}
	ident, err := parseIdentity(b)
	var newer newerFormat
	if errors.As(err, &newer) {
		return dataIdentity{}, fmt.Errorf("%w: data dir %s is in format %d, written by a newer release; release %s reads formats up to %d",
			ErrIncompatibleVersion, dir, int(newer), Version, DataDirFormat)
	}
	if err != nil {
		return dataIdentity{}, fmt.Errorf("zaris: %s: %w", path, err)
	}
	if ident.Name != id {
		return dataIdentity{}, fmt.Errorf("%w: data dir %s belongs to node %q, not %q", ErrInvalidConfig, dir, ident.Name, id)
	}
	return ident, nil
}

// createIdentity records a new identity for node id in dir, atomically: a crash leaves either none or all.
func createIdentity(dir string, id NodeID) (dataIdentity, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ident := dataIdentity{Name: id, Server: binary.LittleEndian.Uint64(b[:]) | 1}
	if err := writeFileAtomic(filepath.Join(dir, identityFile), ident.encode()); err != nil {
		return dataIdentity{}, fmt.Errorf("zaris: record data dir identity: %w", err)
	}
	return ident, nil
}

// privateDir creates the data dir readable by its owner alone, or takes the group's and others' access
// away from one that exists: what it holds (every value, the control plane's log) is nobody else's. A
// directory this process does not own keeps its mode.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("zaris: create data dir: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("zaris: data dir: %w", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		_ = os.Chmod(dir, mode&^0o077) // refused when another user owns it, as a mounted volume's root may
	}
	return nil
}

func (d dataIdentity) encode() []byte {
	return fmt.Appendf(nil, "%s%d\nname %s\nserver %x\n", identityHeader, DataDirFormat, d.Name, d.Server)
}

// newerFormat is parseIdentity's error for an identity of a format newer than DataDirFormat.
type newerFormat int

func (f newerFormat) Error() string {
	return fmt.Sprintf("data dir format %d is newer than %d", int(f), DataDirFormat)
}

// parseIdentity reads what encode wrote; anything else is an error.
func parseIdentity(b []byte) (dataIdentity, error) {
	var d dataIdentity
	sc := bufio.NewScanner(bytes.NewReader(b))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], identityHeader) {
		return d, errors.New("not a data dir identity")
	}
	format, err := strconv.Atoi(strings.TrimPrefix(lines[0], identityHeader))
	switch {
	case err != nil || format < 1:
		return d, fmt.Errorf("malformed data dir format %q", lines[0])
	case format > DataDirFormat:
		return d, newerFormat(format)
	case len(lines) != 3:
		return d, errors.New("malformed data dir identity")
	}
	name, ok := strings.CutPrefix(lines[1], "name ")
	server, ok2 := strings.CutPrefix(lines[2], "server ")
	if !ok || !ok2 || name == "" {
		return d, errors.New("malformed data dir identity")
	}
	n, err := strconv.ParseUint(server, 16, 64)
	if err != nil || n == 0 {
		return d, fmt.Errorf("malformed server in data dir identity: %q", server)
	}
	d = dataIdentity{Name: NodeID(name), Server: n}
	if !bytes.Equal(d.encode(), b) {
		return dataIdentity{}, errors.New("data dir identity not in its written form")
	}
	return d, nil
}

// writeFileAtomic writes path through a synced temporary file renamed into place, then syncs the directory.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// durabilityFile records the DiskDurability of the latest process that ran on a data dir.
const durabilityFile = "disk-durability"

// recordDurability records level as this process's DiskDurability in dir and returns whether the previous
// process waited for its disk before acknowledging. If it did, the directory holds every write it
// acknowledged, and this process restarts with its copies intact.
func recordDurability(dir string, level DiskDurability) (intact bool, err error) {
	path := filepath.Join(dir, durabilityFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, fmt.Errorf("zaris: read %s: %w", path, err)
	default:
		var prior DiskDurability
		if err := prior.UnmarshalText(bytes.TrimSpace(b)); err != nil {
			return false, fmt.Errorf("zaris: %s: %w", path, err)
		}
		intact = prior != DiskBehind
	}
	if err := writeFileAtomic(path, []byte(level.String()+"\n")); err != nil {
		return false, fmt.Errorf("zaris: record disk durability: %w", err)
	}
	return intact, nil
}
