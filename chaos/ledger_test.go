package chaos

import (
	"context"
	"errors"
	"slices"
	"testing"
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
	write("unknown-absent", l.Unknown)
	write("unknown-present", l.Unknown)
	write("unknown-wrong", l.Unknown)
	write("failed", l.Fail)
	l.Attempt("pending", "pending")
	l.Ack("never-attempted")

	store := map[string]string{
		"acked-ok":        "acked-ok",
		"acked-wrong":     "other",
		"acked-flaky":     "acked-flaky",
		"unknown-present": "unknown-present",
		"unknown-wrong":   "other",
	}
	flaky := 0
	var reads []string
	read := func(_ context.Context, key string) (string, bool, error) {
		reads = append(reads, key)
		switch key {
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
	want := LedgerResult{Acked: 5, Unknown: 3, Lost: 2, NotFound: 1, Phantom: 1, Unreadable: 1,
		LostKeys: []string{"acked-missing", "acked-wrong"}}
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

func equalLedgerResults(a, b LedgerResult) bool {
	return a.Acked == b.Acked && a.Unknown == b.Unknown && a.Lost == b.Lost && a.NotFound == b.NotFound &&
		a.Phantom == b.Phantom && a.Unreadable == b.Unreadable && slices.Equal(a.LostKeys, b.LostKeys)
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
