// Package resp is a node's Redis endpoint: the RESP2 and RESP3 protocol, the commands of Redis Cluster
// clients, authentication and ACL users, client-side caching, MULTI/EXEC, and the CLUSTER, INFO and
// CONFIG replies. It reaches the node it serves through one interface, Node, and speaks the vocabulary of
// internal/kv; it never imports the node's package.
package resp
