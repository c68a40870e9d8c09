// Package kv is the vocabulary of key operations that the node and its edges share: operation numbers,
// requests and replies, statuses, the conditions of a put, hash slots and the parsing of numbers the way
// Redis does. It imports nothing of the node, so an edge can speak it without importing the node.
package kv
