package zaris

import (
	"fmt"
	"strconv"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/transport"
)

// clusterProtocol is the protocol the cluster may rise to, from current: the oldest that its members
// speak, counting every member not gone for good (one that failed may come back running what it ran).
// It never falls.
func clusterProtocol(members []member, current uint16) uint16 {
	oldest, found := uint16(0), false
	for _, mb := range members {
		if mb.Status == serf.StatusLeft {
			continue
		}
		if !found || mb.Protocol.Version < oldest {
			oldest, found = mb.Protocol.Version, true
		}
	}
	return max(current, oldest)
}

// peerVersions is what a member's tags say of its versions: the protocol it speaks and works with, and
// the cluster protocol its map records.
type peerVersions struct {
	protocol transport.Greeting
	cluster  uint16
}

// versionTags are the tags that announce v.
func (v peerVersions) tags() map[string]string {
	return map[string]string{
		tagProtocol:        strconv.Itoa(int(v.protocol.Version)),
		tagMinProtocol:     strconv.Itoa(int(v.protocol.MinVersion)),
		tagClusterProtocol: strconv.Itoa(int(v.cluster)),
	}
}

// parseVersionTags reads what tags announced; a member without them predates protocol versions.
func parseVersionTags(tags map[string]string) (peerVersions, bool) {
	pv, err1 := strconv.ParseUint(tags[tagProtocol], 10, 16)
	minPV, err2 := strconv.ParseUint(tags[tagMinProtocol], 10, 16)
	cluster, err3 := strconv.ParseUint(tags[tagClusterProtocol], 10, 16)
	if err1 != nil || err2 != nil || err3 != nil {
		return peerVersions{}, false
	}
	return peerVersions{protocol: transport.Greeting{Version: uint16(pv), MinVersion: uint16(minPV)}, cluster: uint16(cluster)}, true
}

// checkPeerVersions reports why a node of versions own may not work with the member named name that
// announced tags, or nil: the member predates protocol versions, the two protocols are incompatible, or
// either speaks a protocol older than the other's cluster has reached.
func checkPeerVersions(own peerVersions, name string, tags map[string]string) error {
	peer, ok := parseVersionTags(tags)
	switch {
	case !ok:
		return fmt.Errorf("%w: member %s announces no protocol version (a release before %s?); this node speaks %v",
			ErrIncompatibleVersion, name, Version, own.protocol)
	case !own.protocol.Compatible(peer.protocol):
		return fmt.Errorf("%w: member %s speaks %v; this node speaks %v", ErrIncompatibleVersion, name, peer.protocol, own.protocol)
	case peer.cluster > own.protocol.Version:
		return fmt.Errorf("%w: the cluster of member %s runs protocol %d; this node speaks %d",
			ErrIncompatibleVersion, name, peer.cluster, own.protocol.Version)
	case own.cluster > peer.protocol.Version:
		return fmt.Errorf("%w: member %s speaks protocol %d; this cluster runs protocol %d",
			ErrIncompatibleVersion, name, peer.protocol.Version, own.cluster)
	}
	return nil
}
