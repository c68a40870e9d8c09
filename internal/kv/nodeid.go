package kv

// NodeID names a cluster member.
type NodeID string
