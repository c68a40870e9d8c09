package gcheadroom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGOGC(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name    string
		live    uint64
		percent int
		floor   uint64
		want    int
	}{
		{"an empty heap keeps Go's default", 0, 25, 16 * mib, 100},
		{"a heap below the floor keeps the default", 8 * mib, 25, 16 * mib, 100},
		{"a heap whose floor is all its room", 16 * mib, 25, 16 * mib, 100},
		{"the floor gives more room than the share", 32 * mib, 25, 16 * mib, 50},
		{"the floor rounds up", 48 * mib, 25, 16 * mib, 34},
		{"the share once the floor is smaller", 64 * mib, 25, 16 * mib, 25},
		{"a large heap gets its share", 8 << 30, 25, 16 * mib, 25},
		{"no floor", 1 * mib, 10, 0, 10},
		{"a share of 100 or more is Go's default", 8 << 30, 100, 0, 100},
		{"a share of zero is no tuning", 8 << 30, 0, 0, 100},
	} {
		if got := GOGC(tc.live, tc.percent, tc.floor); got != tc.want {
			t.Errorf("%s: GOGC(%d, %d, %d) = %d, want %d", tc.name, tc.live, tc.percent, tc.floor, got, tc.want)
		}
	}
}

// TestKeepBoundsTheHeapGoal holds 64 MiB of live data under a tuner keeping 25% of room: after a
// collection the heap's goal is within that room, not the 100% Go gives; once the data is dropped the
// room goes back to GOGC 100, and Stop gives back the GOGC from before.
func TestKeepBoundsTheHeapGoal(t *testing.T) {
	before := debug.SetGCPercent(80)
	defer debug.SetGCPercent(before)
	tuner := Keep(25, 4<<20)
	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	waitGOGC(t, tuner, 25)
	runtime.GC()
	if goal, held := readGoal(), uint64(64<<20); goal > held*140/100 {
		t.Errorf("heap goal %d MiB with %d MiB live, want at most 1.4x (GOGC 25 and the rest of the heap)", goal>>20, held>>20)
	}
	runtime.KeepAlive(live)
	live = nil
	waitGOGC(t, tuner, 100)
	tuner.Stop()
	if got := debug.SetGCPercent(80); got != 80 {
		t.Errorf("GOGC after Stop = %d, want the 80 set before Keep", got)
	}
}

// waitGOGC collects until the tuner has set want, which it does after a collection, on a goroutine of
// the runtime's.
func waitGOGC(t *testing.T, tuner *Tuner, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tuner.Current() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %d", tuner.Current(), want)
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // the cleanup runs on its own goroutine after the collection
	}
}

func readGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
