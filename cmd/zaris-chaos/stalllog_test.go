package main

import (
	"strings"
	"testing"
	"time"
)

// TestPrintLogWindow keeps the lines of the stall's window that name its partition, exactly, or are errors.
func TestPrintLogWindow(t *testing.T) {
	log := strings.Join([]string{
		`time=2026-12-05T10:00:00.000Z level=INFO msg="before the window" node=a partition=7`,
		`time=2026-12-05T10:00:01.000Z level=INFO msg="promoting" node=a partition=7`,
		`time=2026-12-05T10:00:01.500Z level=INFO msg="another partition" node=a partition=70`,
		`time=2026-12-05T10:00:02.000Z level=ERROR msg="zaris stopped" err="leave"`,
		`time=2026-12-05T10:00:02.500Z level=DEBUG msg="last" node=a partition=7`,
		`not a log line`,
		`time=2026-12-05T10:00:09.000Z level=INFO msg="after the window" node=a partition=7`,
	}, "\n")
	from := time.Date(2026, 12, 5, 10, 0, 0, 500e6, time.UTC)
	var out strings.Builder
	n := printLogWindow(&out, strings.NewReader(log), "zaris-1", 7, from, from.Add(3*time.Second), 10)
	got := out.String()
	if n != 3 {
		t.Fatalf("copied %d lines, want 3:\n%s", n, got)
	}
	for _, want := range []string{`zaris-1: time=2026-12-05T10:00:01.000Z`, `msg="zaris stopped"`, `msg="last"`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if n := printLogWindow(&out, strings.NewReader(log), "zaris-1", 7, from, from.Add(3*time.Second), 1); n != 1 {
		t.Errorf("with a limit of 1 copied %d lines", n)
	}
}
