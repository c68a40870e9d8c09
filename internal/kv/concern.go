package kv

import "fmt"

// WriteConcern says when a write is acknowledged.
type WriteConcern uint8

const (
	// Sync acknowledges a write only after every in-sync replica of its partition has applied it.
	Sync WriteConcern = iota + 1
	// Async acknowledges a write once the owner has applied it; replicas receive it moments later. If the
	// owner dies in between, the write is lost although it was acknowledged.
	Async
)

func (c WriteConcern) String() string {
	switch c {
	case Sync:
		return "Sync"
	case Async:
		return "Async"
	}
	return fmt.Sprintf("WriteConcern(%d)", uint8(c))
}
