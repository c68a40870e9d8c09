package zaris

import (
	"fmt"
	"strconv"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// clusterProtocol is the protocol the cluster of map m may rise to: the oldest that its members speak,
// counting every member gossip knows that has not left, and every node m records that still holds a copy
// (one that failed may come back running what it ran, even if this leader's gossip never knew it). It
// never falls below m.Protocol.
func clusterProtocol(members []member, m *ClusterMap) uint16 {
	oldest, found := uint16(0), false
	note := func(v uint16) {
		if !found || v < oldest {
			oldest, found = v, true
		}
	}
	for _, mb := range members {
		if mb.Status != serf.StatusLeft {
			note(mb.Protocol.Version)
		}
	}
	for id, info := range m.Nodes {
		if m.holds(id) {
			note(info.Protocol)
		}
	}
	return max(m.Protocol, oldest)
}

// peerVersions is what a member's tags say of its versions: the protocol it speaks and works with, and,
// once it has a partition map (hasCluster), the cluster's protocol as that map records it.
type peerVersions struct {
	protocol   transport.Greeting
	cluster    uint16
	hasCluster bool
}

// tags are the gossip tags that announce v.
func (v peerVersions) tags() map[string]string {
	tags := map[string]string{
		tagProtocol:    strconv.Itoa(int(v.protocol.Version)),
		tagMinProtocol: strconv.Itoa(int(v.protocol.MinVersion)),
	}
	if v.hasCluster {
		tags[tagClusterProtocol] = strconv.Itoa(int(v.cluster))
	}
	return tags
}

// parseVersionTags reads what tags announced; a member without them predates protocol versions.
func parseVersionTags(tags map[string]string) (peerVersions, bool) {
	pv, err1 := strconv.ParseUint(tags[tagProtocol], 10, 16)
	minPV, err2 := strconv.ParseUint(tags[tagMinProtocol], 10, 16)
	if err1 != nil || err2 != nil || minPV > pv {
		return peerVersions{}, false
	}
	v := peerVersions{protocol: transport.Greeting{Version: uint16(pv), MinVersion: uint16(minPV)}}
	if tag, ok := tags[tagClusterProtocol]; ok {
		cluster, err := strconv.ParseUint(tag, 10, 16)
		if err != nil {
			return peerVersions{}, false
		}
		v.cluster, v.hasCluster = uint16(cluster), true
	}
	return v, true
}

// checkPeerVersions reports why a node of versions own may not work with the member named name that
// announced tags, or nil: the member predates protocol versions, the two protocols are incompatible, or
// the member's cluster runs a protocol this node cannot speak, too old or too new.
//
// Each node checks its own fit with the others' clusters, not theirs with its own: gossip runs the check
// over every member a joining node learns of, the dead included, and one refusal aborts the whole merge,
// so a member that refused others as too old for its cluster could refuse its own reconnections over a
// dead member of the past. A node too old for the cluster refuses itself; the leader does not record a
// member older than the cluster's protocol that slipped through while the protocol rose.
func checkPeerVersions(own transport.Greeting, name string, tags map[string]string) error {
	peer, ok := parseVersionTags(tags)
	switch {
	case !ok:
		return fmt.Errorf("%w: member %s announces no protocol version (a release before %s?); this node speaks %v",
			ErrIncompatibleVersion, name, Version, own)
	case !own.Compatible(peer.protocol):
		return fmt.Errorf("%w: member %s speaks %v; this node speaks %v", ErrIncompatibleVersion, name, peer.protocol, own)
	case peer.hasCluster && peer.cluster > own.Version:
		return fmt.Errorf("%w: the cluster of member %s runs protocol %d; this node speaks %d",
			ErrIncompatibleVersion, name, peer.cluster, own.Version)
	case peer.hasCluster && own.MinVersion > peer.cluster:
		return fmt.Errorf("%w: the cluster of member %s runs protocol %d; this node works with %d and up",
			ErrIncompatibleVersion, name, peer.cluster, own.MinVersion)
	}
	return nil
}

// backupProtocol is the protocol that introduced backups and restores (OpBackup, OpRestore).
const backupProtocol = 2

// opProtocol is the protocol that introduced op.
func opProtocol(op transport.Op) uint16 {
	switch op {
	case kv.OpBackup, kv.OpRestore:
		return backupProtocol
	}
	return 1
}
