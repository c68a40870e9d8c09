package zaris

import "testing"

// BenchmarkPeerTLS compares, in one run, replicated Puts (RF 2, latency with p50/p99 and throughput)
// through a cluster whose peers speak plain TCP and one whose peers speak mutual TLS with a gossip key.
func BenchmarkPeerTLS(b *testing.B) {
	ca := newTestCA(b)
	for _, tc := range []struct {
		name   string
		secure bool
	}{{"plain", false}, {"tls", true}} {
		c := startSocketCluster(b, 3, func(cfg *Config) {
			cfg.Dialer = nil
			cfg.ReplicationFactor = 2
			cfg.TLS, cfg.GossipKey = nil, nil
			if tc.secure {
				cfg.TLS, cfg.GossipKey = ca.peerConfig(cfg.Name), testGossipKey
			}
		})
		benchPuts(b, tc.name, c.node(0))
		c.stopAll()
	}
}
