package zaris

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// An entry's word holds its version in the low versionBits and, above them, a 16-bit access stamp that the
// LRU and LFU eviction policies read: no byte is added per key. Readers update the stamp under the
// segment's read lock, so the word is read and written atomically.
//
// Under an LRU policy the stamp is the second of the last access, modulo 2^16: an idle time is exact up to
// about 18 hours and wraps after. Under an LFU policy it is Redis's scheme in 16 bits: a logarithmic access
// counter in the high byte, and the minute it last decayed, modulo 256, in the low byte.
const (
	versionBits = 48
	versionMask = 1<<versionBits - 1
)

// accessMode says what the stamp tracks: nothing, recency or frequency. It follows the eviction policy.
type accessMode uint32

const (
	accessNone accessMode = iota
	accessLRU
	accessLFU
)

const (
	lfuInitial    = 5  // a new key's counter, so that it is not the first evicted before its second access
	lfuLogFactor  = 10 // how slowly the counter grows: about a million accesses bring it to 255
	lfuDecayEvery = 1  // minutes per unit of decay of an idle key's counter
)

// version is the entry's version: the revision of its segment that wrote it.
func (e *entry) version() uint64 { return atomic.LoadUint64(&e.word) & versionMask }

// access is the entry's access stamp.
func (e *entry) access() uint16 { return uint16(atomic.LoadUint64(&e.word) >> versionBits) }

// stamp sets the entry's version and access stamp.
func (e *entry) stamp(version uint64, access uint16) {
	atomic.StoreUint64(&e.word, version&versionMask|uint64(access)<<versionBits)
}

// touch records an access at now (Unix nanoseconds) under mode. A stamp that would not change is not
// written, so a key read by many at once is mostly only read.
func (e *entry) touch(mode accessMode, now int64) {
	for {
		old := atomic.LoadUint64(&e.word)
		next := touched(mode, uint16(old>>versionBits), now)
		if next == uint16(old>>versionBits) || atomic.CompareAndSwapUint64(&e.word, old, old&versionMask|uint64(next)<<versionBits) {
			return
		}
	}
}

// touched returns stamp a after an access at now.
func touched(mode accessMode, a uint16, now int64) uint16 {
	switch mode {
	case accessLRU:
		return lruStamp(now)
	case accessLFU:
		return lfuStamp(lfuIncrement(lfuDecayed(a, now)), now)
	}
	return a
}

// written returns the stamp of an entry written at now over old (nil for a new key): an access, which
// under LFU counts on from old's counter.
func written(mode accessMode, old *entry, now int64) uint16 {
	switch {
	case mode == accessNone:
		return 0
	case mode == accessLFU && old == nil:
		return lfuStamp(lfuInitial, now)
	case old == nil:
		return lruStamp(now)
	}
	return touched(mode, old.access(), now)
}

// evictionRank orders entries for eviction under mode: the higher the rank, the sooner evicted. Under
// LRU it is the idle time in seconds; under LFU the inverse of the decayed counter.
func evictionRank(mode accessMode, a uint16, now int64) uint64 {
	switch mode {
	case accessLRU:
		return uint64(lruStamp(now) - a)
	case accessLFU:
		return uint64(255 - lfuDecayed(a, now))
	}
	return 0
}

func lruStamp(now int64) uint16 { return uint16(now / int64(time.Second)) }

func lfuMinute(now int64) uint8 { return uint8(now / int64(time.Minute)) }

func lfuStamp(counter uint8, now int64) uint16 { return uint16(counter)<<8 | uint16(lfuMinute(now)) }

// lfuDecayed is stamp a's counter, less one for each lfuDecayEvery minutes since it last decayed.
func lfuDecayed(a uint16, now int64) uint8 {
	counter, idle := uint8(a>>8), lfuMinute(now)-uint8(a)
	periods := idle / lfuDecayEvery
	if periods >= counter {
		return 0
	}
	return counter - periods
}

// lfuIncrement adds one to counter with a probability that falls as it grows, so 8 bits count about a
// million accesses on a logarithmic scale.
func lfuIncrement(counter uint8) uint8 {
	if counter == 255 {
		return counter
	}
	base := float64(0)
	if counter > lfuInitial {
		base = float64(counter - lfuInitial)
	}
	if rand.Float64() < 1/(base*lfuLogFactor+1) {
		counter++
	}
	return counter
}
