package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// logSink keeps the clusters quiet: instead of printing their warnings and errors it counts them by
// system, level and message, keeping the first full text of each, for the summary. Informational lines
// are dropped. It is muted while clusters close, since a member that sees its peers stop warns about it.
type logSink struct {
	mu       sync.Mutex
	muted    bool
	stage    string // what the run is doing, recorded with each message's first occurrence
	messages map[logKey]*logCount
}

// logKey identifies a message apart from its varying details (slog attributes).
type logKey struct{ system, level, msg string }

type logCount struct {
	n     int
	first string // the first occurrence in full
}

// summaryLines bounds the distinct messages printed per system.
const summaryLines = 10

func newLogSink() *logSink { return &logSink{messages: map[logKey]*logCount{}} }

// note counts one message of system at level; full is the message with its details.
func (s *logSink) note(system, level, msg, full string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.muted {
		return
	}
	k := logKey{system, level, msg}
	c := s.messages[k]
	if c == nil {
		c = &logCount{first: full + " [first during " + s.stage + "]"}
		s.messages[k] = c
	}
	c.n++
}

// at records what the run is doing from now on.
func (s *logSink) at(stage string) {
	s.mu.Lock()
	s.stage = stage
	s.mu.Unlock()
}

// mute stops counting, until unmute.
func (s *logSink) mute() { s.setMuted(true) }

// unmute counts again.
func (s *logSink) unmute() { s.setMuted(false) }

func (s *logSink) setMuted(m bool) {
	s.mu.Lock()
	s.muted = m
	s.mu.Unlock()
}

// summary returns one line per distinct message, "system LEVEL xN: first occurrence", by system then most
// frequent first, at most summaryLines of them.
func (s *logSink) summary() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]logKey, 0, len(s.messages))
	for k := range s.messages {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b logKey) int {
		return cmp.Or(cmp.Compare(a.system, b.system), cmp.Compare(s.messages[b].n, s.messages[a].n), cmp.Compare(a.msg, b.msg))
	})
	var out []string
	shown, skipped := map[string]int{}, map[string]int{}
	for _, k := range keys {
		if shown[k.system] == summaryLines {
			skipped[k.system]++
			continue
		}
		shown[k.system]++
		c := s.messages[k]
		out = append(out, fmt.Sprintf("%s %s x%d: %s", k.system, k.level, c.n, c.first))
	}
	for system, n := range skipped {
		out = append(out, fmt.Sprintf("%s: %d other distinct messages", system, n))
	}
	return out
}

// digits matches the numbers in a log line: ports, partition ids, counts.
var digits = regexp.MustCompile(`[0-9]+`)

// messageShape returns line with every number replaced by N, so that lines differing only in their
// numbers are counted together.
func messageShape(line string) string { return digits.ReplaceAllString(line, "N") }

// slogHandler returns a handler that feeds system's records of level Warn and above to the sink.
func (s *logSink) slogHandler(system string) slog.Handler {
	return &sinkHandler{sink: s, system: system}
}

type sinkHandler struct {
	sink   *logSink
	system string
	attrs  []slog.Attr
}

func (h *sinkHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *sinkHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	h.sink.note(h.system, r.Level.String(), r.Message, b.String())
	return nil
}

func (h *sinkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &sinkHandler{sink: h.sink, system: h.system, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], attrs...)}
}

func (h *sinkHandler) WithGroup(string) slog.Handler { return h }

// lineWriter feeds the lines of a standard-library logger to the sink, with the level taken from the
// "[LEVEL]" tag the line carries; INFO and DEBUG lines are dropped.
type lineWriter struct {
	sink   *logSink
	system string
}

func (w lineWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		text := strings.TrimSpace(string(line))
		level := levelTag(text)
		if text != "" && level != "INFO" && level != "DEBUG" {
			w.sink.note(w.system, level, messageShape(text), text)
		}
	}
	return len(p), nil
}

// levelTag returns the level named in a "[LEVEL]" tag of line ("ERR" counting as ERROR), or "LOG" when
// it has none.
func levelTag(line string) string {
	for _, tag := range []struct{ tag, level string }{
		{"[ERROR]", "ERROR"}, {"[ERR]", "ERROR"}, {"[WARN]", "WARN"}, {"[INFO]", "INFO"}, {"[DEBUG]", "DEBUG"},
	} {
		if strings.Contains(line, tag.tag) {
			return tag.level
		}
	}
	return "LOG"
}
