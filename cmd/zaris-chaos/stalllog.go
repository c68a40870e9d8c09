package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// maxStallLogLines bounds what a failed stall check prints of the servers' logs.
const maxStallLogLines = 80

// printStallLog prints, after a stall over -max-stall, the servers' log lines from the stall's window
// (a second either side) that name its partition or are errors: what a run that fails on a remote machine
// leaves to read. With logs on stderr (-v) they were printed already.
func (h *harness) printStallLog(partition int, from, to time.Time) {
	if h.c.logDir == "" {
		return
	}
	fmt.Printf("server log lines of partition %d or at ERROR, %v to %v:\n", partition,
		from.Add(-time.Second).Format(time.StampMilli), to.Add(time.Second).Format(time.StampMilli))
	printed := 0
	for _, s := range h.c.list() {
		f, err := os.Open(filepath.Join(h.c.logDir, s.name+".log"))
		if err != nil {
			fmt.Println("  ", err)
			continue
		}
		printed += printLogWindow(os.Stdout, f, s.name, partition, from.Add(-time.Second), to.Add(time.Second), maxStallLogLines-printed)
		f.Close()
	}
}

// printLogWindow copies to w, prefixed with server, up to limit lines of log r stamped within [from, to]
// that name partition or are errors, and returns how many it copied.
func printLogWindow(w io.Writer, r io.Reader, server string, partition int, from, to time.Time, limit int) int {
	mark := fmt.Sprintf(" partition=%d ", partition)
	printed := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && printed < limit {
		line := sc.Text()
		at, ok := logTime(line)
		if !ok || at.Before(from) || at.After(to) {
			continue
		}
		if strings.Contains(line+" ", mark) || strings.Contains(line, " level=ERROR ") {
			fmt.Fprintf(w, "  %s: %s\n", server, line)
			printed++
		}
	}
	return printed
}

// logTime reads the time a text-handler log line begins with.
func logTime(line string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, false
	}
	stamp, _, _ := strings.Cut(rest, " ")
	at, err := time.Parse(time.RFC3339Nano, stamp)
	return at, err == nil
}
