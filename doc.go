// Package zaris is an embedded, in-memory distributed map for Go services.
//
// Each process that calls Join becomes a peer of the cluster: it owns some segments of the key space and routes
// every other key straight to that key's owner in one network hop. Placement follows the Redis Cluster slot
// model (CRC16 of the key or its hash tag, modulo 16384), so Zaris and Redis Cluster clients agree on where a
// key lives.
//
// The key space is divided in three levels: 16384 slots, S segments (contiguous slot ranges; the unit of the op
// log and of catch-up) and P partitions (contiguous segment runs; the unit of ownership, replication and
// failover). See placement.go.
package zaris
