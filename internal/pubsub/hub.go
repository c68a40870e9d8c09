// Package pubsub is one node's registry of subscribers: which channels, patterns and shard channels each
// one listens to, and the delivery of a published message to every subscriber it matches. Carrying a
// message to the other nodes is the node's concern, not this package's.
package pubsub

import (
	"slices"
	"sync"

	"github.com/zaris-go/zaris/internal/glob"
)

// Kind is what a subscription names: a channel, a glob pattern of channels, or a shard channel (a channel
// published to one slot's nodes only, as Redis Cluster's SPUBLISH).
type Kind uint8

const (
	Channel Kind = iota
	Pattern
	Shard
	kinds
)

// Message is one delivery. Kind is Channel or Shard as the message was published, or Pattern when the
// subscriber matched it by Pattern.
type Message struct {
	Kind    Kind
	Pattern string
	Channel string
	Payload []byte
}

// Subscriber receives the messages of its subscriptions. Deliver runs with the hub locked, on the
// publisher's goroutine: it must queue the message and return, never block. A subscriber that falls too
// far behind ends itself and unsubscribes (UnsubscribeAll).
type Subscriber interface {
	Deliver(m Message)
}

// Hub is the registry. Its zero value is not ready; use New.
type Hub struct {
	mu   sync.RWMutex
	subs [kinds]map[string]map[Subscriber]struct{}
}

func New() *Hub {
	h := &Hub{}
	for k := range h.subs {
		h.subs[k] = map[string]map[Subscriber]struct{}{}
	}
	return h
}

// Subscribe adds s to name's subscribers and reports whether it was not one already.
func (h *Hub) Subscribe(s Subscriber, kind Kind, name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.subs[kind][name]
	if set == nil {
		set = map[Subscriber]struct{}{}
		h.subs[kind][name] = set
	}
	if _, ok := set[s]; ok {
		return false
	}
	set[s] = struct{}{}
	return true
}

// Unsubscribe removes s from name's subscribers and reports whether it was one.
func (h *Hub) Unsubscribe(s Subscriber, kind Kind, name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unsubscribeLocked(s, kind, name)
}

func (h *Hub) unsubscribeLocked(s Subscriber, kind Kind, name string) bool {
	set := h.subs[kind][name]
	if _, ok := set[s]; !ok {
		return false
	}
	delete(set, s)
	if len(set) == 0 {
		delete(h.subs[kind], name)
	}
	return true
}

// UnsubscribeAll removes s from the subscribers of every name in names, of every kind, as a subscriber
// does when it ends: names lists what it subscribed to.
func (h *Hub) UnsubscribeAll(s Subscriber, names [kinds][]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range names {
		for _, name := range names[k] {
			h.unsubscribeLocked(s, Kind(k), name)
		}
	}
}

// Publish delivers payload, published to channel (a shard channel when shard is set), to every
// subscriber of the channel and, for a channel that is not a shard's, of every pattern it matches. It
// returns the number of deliveries: a subscriber of the channel and of a matching pattern counts twice,
// as in Redis.
func (h *Hub) Publish(shard bool, channel string, payload []byte) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	kind := Channel
	if shard {
		kind = Shard
	}
	delivered := 0
	for s := range h.subs[kind][channel] {
		s.Deliver(Message{Kind: kind, Channel: channel, Payload: payload})
		delivered++
	}
	if shard {
		return delivered
	}
	for pattern, set := range h.subs[Pattern] {
		if !glob.Match([]byte(pattern), []byte(channel), false) {
			continue
		}
		for s := range set {
			s.Deliver(Message{Kind: Pattern, Pattern: pattern, Channel: channel, Payload: payload})
			delivered++
		}
	}
	return delivered
}

// Names returns the channels (or shard channels) with at least one subscriber that match pattern, all
// of them for an empty pattern, sorted.
func (h *Hub) Names(kind Kind, pattern string) []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []string
	for name := range h.subs[kind] {
		if pattern == "" || glob.Match([]byte(pattern), []byte(name), false) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Count returns the number of subscribers of name.
func (h *Hub) Count(kind Kind, name string) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[kind][name])
}

// Patterns returns the number of patterns with at least one subscriber.
func (h *Hub) Patterns() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[Pattern])
}

// DropShards returns, for each subscriber of a shard channel for which gone reports true, those channels,
// and removes those subscriptions: the channels of slots this node no longer serves.
func (h *Hub) DropShards(gone func(channel string) bool) map[Subscriber][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[Subscriber][]string
	for name, set := range h.subs[Shard] {
		if !gone(name) {
			continue
		}
		if out == nil {
			out = map[Subscriber][]string{}
		}
		for s := range set {
			out[s] = append(out[s], name)
		}
		delete(h.subs[Shard], name)
	}
	return out
}
