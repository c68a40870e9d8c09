package zaris

import (
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// latencyBuckets are the upper bounds, in seconds, of the latency histograms: from a cached read to a
// timed-out request.
var latencyBuckets = [...]float64{
	0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// latencyBounds are latencyBuckets in nanoseconds, for the comparisons on the hot path.
var latencyBounds = func() (ns [numBuckets]int64) {
	for i, s := range latencyBuckets {
		ns[i] = int64(s * 1e9)
	}
	return ns
}()

const numBuckets = len(latencyBuckets)

// statusFailed is the outcome of an operation that got no status: the request failed in transit, the
// caller's context ended, or the node closed.
const statusFailed = Status(kv.NumStatuses)

// outcomeName names an outcome in the status label.
func outcomeName(s Status) string {
	if s == statusFailed {
		return "error"
	}
	return s.String()
}

// opSeries counts one operation kind's outcomes and times it.
type opSeries struct {
	outcomes [statusFailed + 1]atomic.Uint64
	latency  histogram
}

// opSide holds the series of every operation kind seen from one side: the caller's, from the call to its
// final reply, retries included, or the owner's, from the request's arrival to its reply.
type opSide struct {
	ops [256]*opSeries // indexed by transport.Op; nil for what is not counted
}

func newOpSide() *opSide {
	s := &opSide{}
	for op := range s.ops {
		if lookupKeyOp(transport.Op(op)) != nil || transport.Op(op) == kv.OpBatch {
			s.ops[op] = &opSeries{}
		}
	}
	return s
}

// observe counts one operation that ended with status, or with err when it got no status, after d.
func (s *opSide) observe(op transport.Op, status Status, err error, d time.Duration) {
	series := s.ops[op]
	if series == nil {
		return
	}
	if err != nil || status >= statusFailed {
		status = statusFailed
	}
	series.outcomes[status].Add(1)
	series.latency.observe(d)
}

// opMetrics are the node's operation series, on both sides.
type opMetrics struct {
	caller, owner *opSide
}

func newOpMetrics() *opMetrics {
	return &opMetrics{caller: newOpSide(), owner: newOpSide()}
}

func (o *owner) ownerOp(op transport.Op, status Status, since time.Time) {
	if o.metrics != nil {
		o.metrics.owner.observe(op, status, nil, time.Since(since))
	}
}

// statusOf is the outcome of a request served without a status of its own.
func statusOf(err error) Status {
	if err != nil {
		return statusFailed
	}
	return StatusSuccess
}

// total sums the operations the side counted; 0 for a nil side (metrics off).
func (s *opSide) total() uint64 {
	if s == nil {
		return 0
	}
	var n uint64
	for _, series := range s.ops {
		if series == nil {
			continue
		}
		for i := range series.outcomes {
			n += series.outcomes[i].Load()
		}
	}
	return n
}

// callerSide and ownerSide return the sides' series, nil with metrics off.
func (m *opMetrics) callerSide() *opSide {
	if m == nil {
		return nil
	}
	return m.caller
}

func (m *opMetrics) ownerSide() *opSide {
	if m == nil {
		return nil
	}
	return m.owner
}
