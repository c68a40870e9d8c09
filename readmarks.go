package zaris

import (
	"sync"
	"time"
)

// readMarks records, per segment, the oldest revision that watch and near-cache polls asked to read after,
// over the current and the previous stretch of idle time. The op log's sweep keeps the ops after it. A
// reader's position only grows, so one that polls at least once per idle has a mark no later than where it
// stands in one of the two stretches; one silent for longer is no longer protected, and if the log no
// longer reaches back to it, it gets the current state instead of the events (watchfeed.go).
type readMarks struct {
	idle time.Duration

	mu        sync.Mutex
	since     time.Time      // the start of the current stretch
	cur, prev map[int]uint64 // segment -> the oldest revision asked after
}

// mark records that a poll at now reads each of segs after the revision at the same index of after.
func (m *readMarks) mark(now time.Time, segs []uint32, after []uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotate(now)
	if m.cur == nil {
		m.cur = make(map[int]uint64, len(segs))
	}
	for i, s := range segs {
		if old, ok := m.cur[int(s)]; !ok || after[i] < old {
			m.cur[int(s)] = after[i]
		}
	}
}

// oldest returns, per segment, the oldest revision a poll of the last one or two stretches asked after at
// now; nil when there was none.
func (m *readMarks) oldest(now time.Time) map[int]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotate(now)
	if len(m.cur) == 0 && len(m.prev) == 0 {
		return nil
	}
	out := make(map[int]uint64, len(m.cur)+len(m.prev))
	for _, marks := range []map[int]uint64{m.prev, m.cur} {
		for s, after := range marks {
			if old, ok := out[s]; !ok || after < old {
				out[s] = after
			}
		}
	}
	return out
}

// rotate starts a new stretch once the current one has lasted idle; the current one becomes the previous,
// unless it ended more than idle ago. Called with m.mu held.
func (m *readMarks) rotate(now time.Time) {
	switch age := now.Sub(m.since); {
	case age < m.idle:
		return
	case age < 2*m.idle:
		m.prev = m.cur
	default:
		m.prev = nil
	}
	m.cur, m.since = nil, now
}
