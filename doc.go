// Package zaris is an embedded, in-memory distributed map for Go services.
//
// Each process that calls Join becomes a peer of the cluster: it owns some partitions of the key space and
// sends every other key straight to that key's owner in one network hop. No node forwards a request: a node
// that receives a key it does not actively own answers Moved, and the sender refreshes its routing table
// and retries, a bounded number of times.
//
// # Placement
//
// A key's slot is Redis Cluster's (CRC16/XMODEM of the key, or of its {hash tag}, modulo 16384), so Zaris and
// Redis Cluster clients agree on where a key lives. Slots map proportionally onto S segments (the unit of the
// op log and of catch-up) and segments onto P partitions (the unit of ownership, replication and failover).
// S, P and the replication factor are fixed when the cluster is created; a node with other values is refused
// at Join with ErrClusterMismatch.
//
// # Control plane
//
// Membership and failure detection use gossip (serf). The cluster map (the partition map, and per partition
// the active owner, an epoch and a health state) is the replicated state of a raft group of up to MaxVoters
// voters; the other nodes follow as non-voters. Only the raft leader decides, so every change to the map is
// a committed, ordered command: two nodes never hand out the same epoch, and a minority side of a network
// partition decides nothing. Every node applies each committed change and repoints its routing table.
//
// # Consistency guarantees, as of this version
//
//   - A key has exactly one active owner at a time in the committed map, and every read and write of the key
//     is served by the node that believes itself that owner. Operations on one key, through any node, are
//     applied in the order the owner receives them.
//   - Values live in the owner's memory only: this version does not replicate them yet, whatever the
//     replication factor says. If the owner crashes, or leaves, its keys are lost and its partitions become
//     Unavailable (ErrPartitionUnavailable, never a false ErrNotFound); nothing moves them to another node yet.
//   - An owner cut off from the control plane keeps serving the partitions it believes it owns.
//   - A call that fails with a connection error (transport.ErrConnectionLost) may or may not have been
//     applied; one that fails with transport.ErrUnreachable was never sent.
//   - Expired keys are never returned; they are reclaimed in the background.
package zaris
