package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// opKind is what a phase does.
type opKind int

const (
	opPut opKind = iota
	opGet
	opGetMany
)

var opNames = map[string]opKind{"put": opPut, "get": opGet, "mget": opGetMany}

// phase is one measured workload: an operation on clusters keeping copies copies of every key.
type phase struct {
	name   string
	kind   opKind
	copies int
}

// parsePhase parses a name such as put-1, get-2 or mget-2.
func parsePhase(name string) (phase, error) {
	op, n, ok := strings.Cut(name, "-")
	kind, known := opNames[op]
	copies, err := strconv.Atoi(n)
	if !ok || !known || err != nil || copies < 1 || copies > members {
		return phase{}, fmt.Errorf("phase %q: want put, get or mget, a dash, and 1 to %d copies", name, members)
	}
	return phase{name: name, kind: kind, copies: copies}, nil
}

// unknownStamp marks a key whose last write failed: it may or may not have been applied.
const unknownStamp = ^uint64(0)

// subject is one cluster under test with its load clients and what was written to it.
type subject struct {
	sys     system
	cluster cluster
	clients []client // one per load goroutine; goroutine g uses member g % members
	// stamps holds, per key, the stamp of the last value acknowledged for it. During a put phase a key
	// is written by one goroutine only, so the last acknowledged write is well defined.
	stamps   []uint64
	putRuns  uint64
	checked  int
	mismatch int
}

// newSubject starts a cluster of sys and one client per load goroutine.
func newSubject(ctx context.Context, sys system, copies int, o options, sink *logSink) (*subject, error) {
	c, err := sys.start(ctx, copies, sink)
	if err != nil {
		return nil, err
	}
	s := &subject{sys: sys, cluster: c, stamps: make([]uint64, o.keys)}
	for g := range o.goroutines {
		cl, err := c.client(g % members)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("%s client: %w", sys.name, err)
		}
		s.clients = append(s.clients, cl)
	}
	return s, nil
}

// close closes the clients and the cluster.
func (s *subject) close() error {
	for _, c := range s.clients {
		c.close()
	}
	return s.cluster.close()
}

// keyNames holds every key's name, made once so that no phase pays for formatting.
type keyNames []string

func makeKeys(n int) keyNames {
	k := make(keyNames, n)
	for i := range k {
		k[i] = "bench:" + strconv.Itoa(i)
	}
	return k
}

// encodeValue fills buf with the value for stamp: the stamp in its first 8 bytes, then filler.
func encodeValue(buf []byte, stamp uint64) {
	binary.BigEndian.PutUint64(buf, stamp)
	for i := 8; i < len(buf); i++ {
		buf[i] = byte('a' + (stamp+uint64(i))%26)
	}
}

// workerState is what one load goroutine keeps during a phase.
type workerState struct {
	hist     histogram
	ops      uint64
	errors   uint64
	firstErr error
}

// fail counts one failed operation and keeps the first error.
func (w *workerState) fail(err error) {
	w.errors++
	if w.firstErr == nil {
		w.firstErr = err
	}
}

// load describes one timed run of a phase on a subject.
type load struct {
	s     *subject
	p     phase
	o     options
	keys  keyNames
	round int
	stamp uint64 // high bits of the stamps this run writes
}

// run runs the phase with o.goroutines goroutines for o.duration and returns its measurements.
func (l load) run(ctx context.Context) result {
	if l.p.kind == opPut {
		l.s.putRuns++
		l.stamp = l.s.putRuns << 32
	}
	workers := make([]workerState, l.o.goroutines)
	deadline := time.Now().Add(l.o.duration)
	cpu := startCPUMeter()
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() { l.work(ctx, g, deadline, &workers[g]) })
	}
	wg.Wait()
	wall := time.Since(cpu.wall)
	return l.collect(workers, wall, cpu.cores())
}

// work runs goroutine g's operations until deadline, timing each.
func (l load) work(ctx context.Context, g int, deadline time.Time, w *workerState) {
	rng := rand.New(rand.NewPCG(uint64(g), uint64(l.round)<<8|uint64(l.p.kind)))
	c := l.s.clients[g]
	value := make([]byte, l.o.value)
	batch := make([]string, l.o.batch)
	var seq uint64
	for t0 := time.Now(); t0.Before(deadline) && ctx.Err() == nil; {
		switch l.p.kind {
		case opPut:
			seq++
			l.putOne(ctx, c, l.ownKey(rng, g), l.stamp|seq, value, w)
		case opGet:
			l.getOne(ctx, c, rng.IntN(len(l.keys)), w)
		case opGetMany:
			l.getBatch(ctx, c, rng, batch, w)
		}
		t1 := time.Now()
		w.hist.record(t1.Sub(t0))
		w.ops++
		t0 = t1
	}
}

// ownKey picks uniformly one of the keys goroutine g alone writes: those equal to g modulo the goroutines.
func (l load) ownKey(rng *rand.Rand, g int) int {
	n := (len(l.keys) - g + l.o.goroutines - 1) / l.o.goroutines
	return g + rng.IntN(n)*l.o.goroutines
}

func (l load) putOne(ctx context.Context, c client, key int, stamp uint64, value []byte, w *workerState) {
	encodeValue(value, stamp)
	if err := c.put(ctx, l.keys[key], value); err != nil {
		l.s.stamps[key] = unknownStamp
		w.fail(fmt.Errorf("put %s: %w", l.keys[key], err))
		return
	}
	l.s.stamps[key] = stamp
}

func (l load) getOne(ctx context.Context, c client, key int, w *workerState) {
	v, err := c.get(ctx, l.keys[key])
	if err == nil && len(v) != l.o.value {
		err = fmt.Errorf("read %d bytes, want %d", len(v), l.o.value)
	}
	if err != nil {
		w.fail(fmt.Errorf("get %s: %w", l.keys[key], err))
	}
}

func (l load) getBatch(ctx context.Context, c client, rng *rand.Rand, batch []string, w *workerState) {
	for i := range batch {
		batch[i] = l.keys[rng.IntN(len(l.keys))]
	}
	failed, err := c.getMany(ctx, batch)
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d of %d keys not read", failed, len(batch))
	}
	if err != nil {
		w.fail(fmt.Errorf("multi-get: %w", err))
	}
}

// collect merges the goroutines' measurements.
func (l load) collect(workers []workerState, wall time.Duration, cores float64) result {
	r := result{system: l.s.sys.name, phase: l.p.name, wall: wall, cores: cores, keysPerOp: 1, hist: &histogram{}}
	if l.p.kind == opGetMany {
		r.keysPerOp = l.o.batch
	}
	for i := range workers {
		w := &workers[i]
		r.ops += w.ops
		r.errors += w.errors
		if r.firstErr == nil {
			r.firstErr = w.firstErr
		}
		r.hist.merge(&w.hist)
	}
	return r
}

// preload writes every key once, spread over all goroutines and members, untimed.
func preload(ctx context.Context, s *subject, keys keyNames, o options) error {
	var wg sync.WaitGroup
	errs := make([]error, o.goroutines)
	s.putRuns++
	stampBase := s.putRuns << 32
	for g := range o.goroutines {
		wg.Go(func() {
			value := make([]byte, o.value)
			for k := g; k < len(keys) && errs[g] == nil; k += o.goroutines {
				stamp := stampBase | uint64(k)
				encodeValue(value, stamp)
				if err := s.clients[g].put(ctx, keys[k], value); err != nil {
					errs[g] = fmt.Errorf("%s preload %s: %w", s.sys.name, keys[k], err)
				}
				s.stamps[k] = stamp
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// verify reads back a sample of keys through every member and counts those whose value is not the last
// one acknowledged; keys whose last write failed are skipped.
func verify(ctx context.Context, s *subject, keys keyNames, o options, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	want := make([]byte, o.value)
	for i := 0; i < o.verify; i++ {
		k := rng.IntN(len(keys))
		stamp := s.stamps[k]
		if stamp == unknownStamp {
			continue
		}
		got, err := s.clients[i%len(s.clients)].get(ctx, keys[k])
		if ctx.Err() != nil {
			return ctx.Err()
		}
		encodeValue(want, stamp)
		s.checked++
		if err != nil || string(got) != string(want) {
			s.mismatch++
		}
	}
	return nil
}
