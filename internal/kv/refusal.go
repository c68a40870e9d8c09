package kv

// Refusal codes: a reply's Int beside StatusInvalidRequest, saying why a key operation was refused, so
// that an edge can answer as Redis does.
const (
	RefusedIncrOverflow = 1 // an increment would overflow the int64
	RefusedNotFloat     = 2 // the value or the increment is not a float
	RefusedNotFinite    = 3 // the float sum would not be finite
	RefusedTooLarge     = 4 // the value would grow past the size limit
	RefusedNoFrequency  = 5 // OBJECT FREQ outside an LFU policy
	RefusedIdleTimeLFU  = 6 // OBJECT IDLETIME under an LFU policy
	RefusedNoIdleTime   = 7 // OBJECT IDLETIME under a policy that tracks no use
)
