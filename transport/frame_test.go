package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"runtime"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	envelopes := []envelope{
		{kind: kindRequest, id: 1, op: 0},
		{kind: kindResponse, id: 127, op: 127, payload: []byte("x")},
		{kind: kindError, id: 128, op: 128, payload: []byte("boom")},
		{kind: kindRequest, id: math.MaxUint32 + 1, op: math.MaxUint16, payload: bytes.Repeat([]byte{7}, 300)},
		{kind: kindRequest, id: math.MaxUint64, op: 1, payload: bytes.Repeat([]byte{9}, 70_000)},
		{kind: kindGoAway, id: 0, op: goAwayIdle},
	}
	var stream []byte
	for _, e := range envelopes {
		stream = appendFrame(stream, e)
	}
	fr := newFrameReader(bytes.NewReader(stream), DefaultMaxFrameSize)
	for _, want := range envelopes {
		body, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEnvelope(body)
		if err != nil {
			t.Fatal(err)
		}
		if !sameEnvelope(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	if _, err := fr.next(); err != io.EOF {
		t.Fatalf("after the last frame got %v, want io.EOF", err)
	}
}

func TestEnvelopeOverheadIsAnUpperBound(t *testing.T) {
	for _, n := range []int{0, 255, 256, 65535, 65536} {
		frame := appendFrameHeader(nil, kindError, math.MaxUint64, math.MaxUint16, n)
		if got := len(frame) - lengthPrefixSize; got > EnvelopeOverhead {
			t.Fatalf("payload of %d: envelope takes %d bytes, more than EnvelopeOverhead", n, got)
		}
	}
}

func TestFrameTooLargeBeforeAllocating(t *testing.T) {
	prefix := binary.BigEndian.AppendUint32(nil, math.MaxUint32)
	fr := newFrameReader(&repeatReader{data: prefix}, 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	allocs := testing.AllocsPerRun(100, func() {
		_, err := fr.next()
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("got %v, want ErrFrameTooLarge", err)
		}
	})
	runtime.ReadMemStats(&after)
	if allocs > 8 { // the error value only
		t.Errorf("%v allocations per refused frame", allocs)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("refusing 101 frames allocated %d bytes", grown)
	}
	_, err := fr.next()
	if want := "4294967295 bytes exceeds the limit of 1048576"; err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q should name both sizes", err)
	}
}

func TestBodyGrowsWithArrivingBytes(t *testing.T) {
	// The prefix claims 60 MiB but only 100 bytes follow.
	stream := binary.BigEndian.AppendUint32(nil, 60<<20)
	stream = append(stream, make([]byte, 100)...)
	fr := newFrameReader(bytes.NewReader(stream), DefaultMaxFrameSize)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := fr.next()
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Fatalf("a truncated frame allocated %d bytes", grown)
	}
}

func TestAwaitTimeoutLosesNothing(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	fr := newFrameReader(server, DefaultMaxFrameSize).withTimeout(server, time.Minute)
	if err := fr.await(time.Now().Add(10 * time.Millisecond)); !isTimeout(err) {
		t.Fatalf("await on a silent connection: %v, want a timeout", err)
	}
	want := envelope{kind: kindRequest, id: 9, op: 3, payload: []byte("after the timeout")}
	go client.Write(appendFrame(nil, want))
	if err := fr.await(time.Time{}); err != nil {
		t.Fatal(err)
	}
	body, err := fr.next()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeEnvelope(body); err != nil || !sameEnvelope(got, want) {
		t.Fatalf("got %+v, %v: want %+v", got, err, want)
	}
}

func TestIncompleteFrameTimesOut(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	fr := newFrameReader(server, DefaultMaxFrameSize).withTimeout(server, 20*time.Millisecond)
	frame := appendFrame(nil, envelope{kind: kindRequest, id: 1, op: 1, payload: []byte("cut short")})
	go client.Write(frame[:len(frame)-1])
	if err := fr.await(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.next(); !errors.Is(err, ErrFrameTimeout) {
		t.Fatalf("got %v, want ErrFrameTimeout", err)
	}
}

// repeatReader yields data over and over.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.data[r.off:])
		n += c
		r.off = (r.off + c) % len(r.data)
	}
	return n, nil
}

func sameEnvelope(a, b envelope) bool {
	return a.kind == b.kind && a.id == b.id && a.op == b.op && bytes.Equal(a.payload, b.payload)
}

// FuzzDecodeFrame feeds arbitrary bytes to the frame reader and envelope decoder. Nothing may panic, every
// failure must be a framing error or a short read, and every frame that decodes must survive re-encoding.
func FuzzDecodeFrame(f *testing.F) {
	const maxFrame = 1 << 10
	f.Add(appendFrame(nil, envelope{kind: kindRequest, id: 1, op: 2, payload: []byte("hi")}))
	f.Add(appendFrame(nil, envelope{kind: kindError, id: math.MaxUint64, op: math.MaxUint16}))
	f.Add([]byte{0, 0, 0, 1, 0xc0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(appendFrame(nil, envelope{kind: kindGoAway, op: goAwayBusy}))
	f.Add(appendFrame(nil, envelope{kind: kindGoAway + 1, id: 1, op: goAwayIdle}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), maxFrame)
		for {
			body, err := fr.next()
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("unexpected reader error %v", err)
				}
				return
			}
			if len(body) > maxFrame {
				t.Fatalf("body of %d bytes passed a limit of %d", len(body), maxFrame)
			}
			env, err := decodeEnvelope(body)
			if err != nil {
				if !errors.Is(err, ErrMalformedFrame) {
					t.Fatalf("decode error %v is not ErrMalformedFrame", err)
				}
				return
			}
			again, err := decodeEnvelope(appendFrame(nil, env)[lengthPrefixSize:])
			if err != nil || !sameEnvelope(again, env) {
				t.Fatalf("re-encoding %+v gave %+v, %v", env, again, err)
			}
		}
	})
}
