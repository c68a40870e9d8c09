package durability

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger passes Pebble's own log lines to slog: its routine messages at debug, its errors at
// error. With no logger configured it writes to a discarding handler, so Pebble stays quiet.
type pebbleLogger struct {
	l *slog.Logger
}

func (p pebbleLogger) Infof(format string, args ...any) { p.log(slog.LevelDebug, format, args) }

func (p pebbleLogger) Errorf(format string, args ...any) { p.log(slog.LevelError, format, args) }

// Fatalf is how Pebble reports a state it cannot go on from, such as a failed WAL or MANIFEST write. It
// logs and panics rather than exit the process as Pebble's default logger does, which still stops the
// goroutine that would otherwise keep writing on a broken store.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble fatal error", "msg", msg)
	panic("durability: pebble: " + msg)
}

func (p pebbleLogger) log(level slog.Level, format string, args []any) {
	if p.l.Enabled(context.Background(), level) {
		p.l.Log(context.Background(), level, fmt.Sprintf(format, args...))
	}
}

// pebbleEvents reports Pebble's background failures through l instead of Pebble's defaults, which for a
// corrupt file would call Fatalf. The read or write that meets the corruption returns an error anyway.
func pebbleEvents(l *slog.Logger) *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			l.Error("pebble background error", "err", err)
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			l.Error("pebble data corruption", "path", info.Path, "err", info.Details)
		},
	}
}
