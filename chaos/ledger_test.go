package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLedgerVerify(t *testing.T) {
	var l Ledger
	write := func(key string, settle func(string)) {
		l.Attempt(key, key)
		settle(key)
	}
	write("acked-ok", l.Ack)
	write("acked-missing", l.Ack)
	write("acked-wrong", l.Ack)
	write("acked-unreadable", l.Ack)
	write("acked-flaky", l.Ack)
	write("acked-beyond", l.Ack)
	write("acked-beyond-missing", l.Ack)
	write("unknown-absent", l.Unknown)
	write("unknown-present", l.Unknown)
	write("unknown-wrong", l.Unknown)
	write("failed", l.Fail)
	write("acked-evicted", l.Ack)
	write("acked-evicted-kept", l.Ack)
	write("acked-evicted-wrong", l.Ack)
	for _, k := range []string{"acked-evicted", "acked-evicted-kept", "acked-evicted-wrong"} {
		l.Evicted(k)
	}
	l.Attempt("pending", "pending")
	l.Ack("never-attempted")

	store := map[string]string{
		"acked-ok":            "acked-ok",
		"acked-wrong":         "other",
		"acked-flaky":         "acked-flaky",
		"unknown-present":     "unknown-present",
		"unknown-wrong":       "other",
		"acked-evicted-kept":  "acked-evicted-kept",
		"acked-evicted-wrong": "other",
	}
	flaky := 0
	var reads []string
	read := func(_ context.Context, key string) (string, bool, error) {
		reads = append(reads, key)
		switch key {
		case "acked-beyond":
			return "", false, fmt.Errorf("unavailable: %w", ErrOutsideFailureModel)
		case "acked-unreadable":
			return "", false, errors.New("unavailable")
		case "acked-flaky":
			if flaky++; flaky < 3 {
				return "", false, errors.New("unavailable")
			}
		}
		v, ok := store[key]
		return v, ok, nil
	}

	res := l.Verify(context.Background(), read)
	want := LedgerResult{Acked: 10, Unknown: 3, Lost: 4, NotFound: 2, Phantom: 1, Unreadable: 1, Destroyed: 1, Evicted: 1,
		LostKeys: []string{"acked-beyond-missing", "acked-evicted-wrong", "acked-missing", "acked-wrong"}}
	if !equalLedgerResults(res, want) {
		t.Fatalf("Verify = %+v, want %+v", res, want)
	}
	for _, k := range []string{"failed", "pending", "never-attempted"} {
		if slices.Contains(reads, k) {
			t.Errorf("%s was read back; only acked and unknown keys should be", k)
		}
	}
	if n := count(reads, "acked-unreadable"); n != 1+readRetries {
		t.Errorf("unreadable key read %d times, want %d", n, 1+readRetries)
	}
	if n := count(reads, "acked-beyond"); n != 1 {
		t.Errorf("key beyond the failure model read %d times, want 1: no retry brings it back", n)
	}
}

func TestLedgerVerifyStopsRetryingWhenCancelled(t *testing.T) {
	var l Ledger
	l.Attempt("k", "k")
	l.Ack("k")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reads := 0
	res := l.Verify(ctx, func(context.Context, string) (string, bool, error) {
		reads++
		return "", false, errors.New("unavailable")
	})
	if res.Unreadable != 1 || reads != 1 {
		t.Fatalf("Unreadable = %d after %d reads, want 1 after 1", res.Unreadable, reads)
	}
}

func TestLedgerValue(t *testing.T) {
	if v := LedgerValue("ledger-1-2", 0); v != "ledger-1-2" {
		t.Fatalf("LedgerValue with no size = %q, want the key", v)
	}
	a, b := LedgerValue("ledger-1-2", 1024), LedgerValue("ledger-1-3", 1024)
	if len(a) != 1024 || !strings.HasPrefix(a, "ledger-1-2/") {
		t.Fatalf("LedgerValue = %d bytes starting %q, want 1024 starting with the key and '/'", len(a), a[:min(len(a), 16)])
	}
	if a != LedgerValue("ledger-1-2", 1024) {
		t.Fatal("LedgerValue differs between calls with the same key")
	}
	if a[len("ledger-1-2/"):] == b[len("ledger-1-3/"):] {
		t.Fatal("two keys got the same filler")
	}
}

func equalLedgerResults(a, b LedgerResult) bool {
	return a.Acked == b.Acked && a.Unknown == b.Unknown && a.Lost == b.Lost && a.NotFound == b.NotFound &&
		a.Phantom == b.Phantom && a.Unreadable == b.Unreadable && a.Destroyed == b.Destroyed && a.Evicted == b.Evicted &&
		slices.Equal(a.LostKeys, b.LostKeys)
}

func count(items []string, s string) int {
	n := 0
	for _, it := range items {
		if it == s {
			n++
		}
	}
	return n
}

// TestLedgerAsOf checks what a copy taken at a cut must hold: writes acknowledged before it, and nothing
// but their own values for the others.
func TestLedgerAsOf(t *testing.T) {
	var l Ledger
	l.Attempt("before", "b")
	l.Ack("before")
	l.Attempt("failed", "f")
	l.Fail("failed")
	l.Attempt("pending", "p")
	cut := time.Now()
	for !time.Now().After(cut) {
	}
	l.Attempt("after", "a")
	l.Ack("after")
	copyAt := map[string]string{"before": "b", "pending": "p"}
	read := func(_ context.Context, key string) (string, bool, error) {
		v, ok := copyAt[key]
		return v, ok, nil
	}
	if res := l.AsOf(cut).Verify(context.Background(), read); res.Lost != 0 || res.Acked != 1 || res.Unknown != 2 || res.Phantom != 0 {
		t.Fatalf("as of the cut: %+v", res)
	}
	if res := l.Verify(context.Background(), read); res.Lost != 1 {
		t.Fatalf("the whole ledger must miss the write after the cut: %+v", res)
	}
	delete(copyAt, "before")
	if res := l.AsOf(cut).Verify(context.Background(), read); res.Lost != 1 {
		t.Fatalf("a write acknowledged before the cut missing: %+v", res)
	}
}
