package clocktest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

var start = time.Unix(1_000_000, 0)

// fired returns the event waiting on ch, if any.
func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestTimerFiresAtItsDeadline(t *testing.T) {
	c := New(start)
	timer := c.NewTimer(time.Second)
	c.Advance(time.Second - time.Nanosecond)
	if _, ok := fired(timer.C()); ok {
		t.Fatal("timer fired before its deadline")
	}
	c.Advance(time.Nanosecond)
	at, ok := fired(timer.C())
	if !ok || !at.Equal(start.Add(time.Second)) {
		t.Fatalf("timer at its deadline: fired %v at %v; want at %v", ok, at, start.Add(time.Second))
	}
	c.Advance(time.Hour)
	if _, ok := fired(timer.C()); ok {
		t.Fatal("timer fired twice")
	}
	if got := c.Now(); !got.Equal(start.Add(time.Hour + time.Second)) {
		t.Fatalf("Now = %v after advancing 1h1s", got)
	}
}

func TestTimerStopAndReset(t *testing.T) {
	c := New(start)
	timer := c.NewTimer(time.Second)
	if !timer.Stop() {
		t.Fatal("Stop of an armed timer reported false")
	}
	c.Advance(2 * time.Second)
	if _, ok := fired(timer.C()); ok {
		t.Fatal("stopped timer fired")
	}
	if timer.Stop() {
		t.Fatal("second Stop reported true")
	}
	if timer.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported it armed")
	}
	c.Advance(time.Second)
	if _, ok := fired(timer.C()); !ok {
		t.Fatal("reset timer did not fire")
	}

	// An event not taken before Reset is not received after it.
	timer.Reset(time.Second)
	c.Advance(time.Second)
	timer.Reset(time.Second)
	if _, ok := fired(timer.C()); ok {
		t.Fatal("event from before Reset received after it")
	}
	timer.Reset(0)
	if _, ok := fired(timer.C()); !ok {
		t.Fatal("Reset(0) did not fire at once")
	}
}

func TestTickerFiresEachPeriodAndDropsUntaken(t *testing.T) {
	c := New(start)
	tick := c.NewTicker(time.Second)
	for i := 1; i <= 3; i++ {
		c.Advance(time.Second)
		at, ok := fired(tick.C())
		if !ok || !at.Equal(start.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("tick %d: fired %v at %v", i, ok, at)
		}
	}
	// Ten periods at once: the receiver took none of them, so it finds only the first.
	c.Advance(10 * time.Second)
	at, ok := fired(tick.C())
	if !ok || !at.Equal(start.Add(4*time.Second)) {
		t.Fatalf("after ten periods: fired %v at %v; want the tick at 4s", ok, at)
	}
	if _, ok := fired(tick.C()); ok {
		t.Fatal("more than one tick buffered")
	}
	tick.Stop()
	c.Advance(10 * time.Second)
	if _, ok := fired(tick.C()); ok {
		t.Fatal("stopped ticker fired")
	}
}

func TestAdvanceFiresInDeadlineOrder(t *testing.T) {
	c := New(start)
	var mu sync.Mutex
	var order []string
	var at []time.Time
	record := func(name string) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			at = append(at, c.Now())
		}
	}
	c.AfterFunc(3*time.Second, record("3s"))
	c.AfterFunc(time.Second, record("1s"))
	c.AfterFunc(2*time.Second, record("2s-a"))
	c.AfterFunc(2*time.Second, record("2s-b"))
	stopped := c.AfterFunc(time.Second, record("stopped"))
	stopped.Stop()
	// A function that arms another timer due within the same advance sees it fire too.
	c.AfterFunc(1500*time.Millisecond, func() {
		record("1.5s")()
		c.AfterFunc(time.Second, record("2.5s"))
	})
	c.Advance(5 * time.Second)
	want := []string{"1s", "1.5s", "2s-a", "2s-b", "2.5s", "3s"}
	if !slices.Equal(order, want) {
		t.Fatalf("fired %v; want %v", order, want)
	}
	for i, d := range []time.Duration{1000, 1500, 2000, 2000, 2500, 3000} {
		if !at[i].Equal(start.Add(d * time.Millisecond)) {
			t.Fatalf("%s ran with the clock at %v; want %v", order[i], at[i], start.Add(d*time.Millisecond))
		}
	}
	if c.Armed() != 0 {
		t.Fatalf("%d timers armed after all fired", c.Armed())
	}
}

func TestBlockUntilWaitsForArmedTimers(t *testing.T) {
	c := New(start)
	done := make(chan time.Time)
	go func() {
		timer := c.NewTimer(time.Minute)
		done <- <-timer.C()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if at := <-done; !at.Equal(start.Add(time.Minute)) {
		t.Fatalf("sleeper woke at %v", at)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	if err := c.BlockUntil(short, 1); err == nil {
		t.Fatal("BlockUntil returned with nothing armed")
	}
}
