package kv

// Scan positions. Every key has a position in one ordered space: its slot in the top 14 bits, then 50 bits
// of a hash of the whole key. Every node computes the same position for a key, so a cursor, the position
// where a scan resumes, means the same on whichever node owns that range next.
const (
	// ScanHashBits are the bits of a position below its slot.
	ScanHashBits = 64 - slotBits
	// ScanDone is the cursor of a scan that has visited the whole key space; it is also the cursor that
	// starts one, as Redis's SCAN has it. No key position after the first is ever a resumption point at 0.
	ScanDone uint64 = 0
	// MaxScanCount bounds the keys one page visits, whatever the request asks.
	MaxScanCount = 1 << 20
	// MaxMatchPattern bounds a scan's MATCH pattern, in bytes: far beyond any key pattern in use, and short
	// enough that matching one against each key visited stays cheap.
	MaxMatchPattern = 64 << 10
	// ScanKeyOverhead is what a returned key costs beyond its bytes, on the wire and in RESP.
	ScanKeyOverhead = 16
)

// ScanSlot returns the slot of position pos.
func ScanSlot(pos uint64) uint16 { return uint16(pos >> ScanHashBits) }

// ScanRequest asks an owner for one page of keys from Cursor, a scan position.
type ScanRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	Cursor   uint64
	Count    int    // keys to visit at most; the page returns those of them that are live and match
	Match    []byte // a Redis glob the keys must match; nil matches every key
	Type     string // the type the keys' values must have, as TYPE names it; "" matches every type
}

// ScanReply answers a ScanRequest: the keys found and the position to resume at, ScanDone once the page
// reached the end of the key space. A refusal carries the owner's view, as Reply does.
type ScanReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status
	Keys     []string
	Next     uint64
	Owner    NodeID
	Epoch    uint64
	MapIndex uint64
}
