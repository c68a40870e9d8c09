package zaris

import "github.com/zaris-go/zaris/transport"

// Version is this release of Zaris, a semantic version (see CHANGELOG.md).
const Version = "0.10.0"

// ProtocolVersion is the protocol this release speaks to its peers: the data port's messages, gossip's
// tags and the control plane's commands. A node works with peers of the protocol before or after its own,
// so a cluster can be upgraded, or rolled back, one process at a time. What a protocol version introduces
// is used only once the cluster's protocol (ClusterMap.Protocol) has reached it: the leader raises that to
// the oldest protocol its members speak, never lowers it, and from then on refuses nodes that speak an
// older one.
const ProtocolVersion = 2

// DataDirFormat is the format of the data directories this release writes. It refuses a directory of a
// newer format rather than misread it.
const DataDirFormat = 1

// greeting is the protocol a node of cfg speaks and the oldest it works with, as it announces them on the
// data port and in gossip.
func greeting(cfg *Config) transport.Greeting {
	if cfg.hooks.greeting != nil {
		return *cfg.hooks.greeting
	}
	v := uint16(ProtocolVersion)
	if cfg.PreviousProtocol {
		v--
	}
	return transport.Greeting{Version: v, MinVersion: max(v, 1) - 1}
}
