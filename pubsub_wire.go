package zaris

import (
	"encoding/binary"
	"errors"

	"github.com/zaris-go/zaris/internal/pubsub"
)

// publishBatch is one OpPublish request: messages a node published, for the receiver's subscribers, in
// the order it published them. Seq numbers the first message on the link from From's process Incarnation
// to the receiver, the others following it, so that a batch sent again is delivered once.
type publishBatch struct {
	From        NodeID
	Incarnation uint64
	Seq         uint64
	Messages    []publishedMessage
}

// publishedMessage is one message: to a channel, or to a shard channel.
type publishedMessage struct {
	shard   bool
	channel string
	payload []byte
}

// size is what the message takes in a batch, within a few bytes.
func (m *publishedMessage) size() int { return len(m.channel) + len(m.payload) + 16 }

var errPublishBatch = errors.New("zaris: malformed publish batch")

func (b *publishBatch) marshal() []byte {
	size := len(b.From) + 32
	for i := range b.Messages {
		size += b.Messages[i].size()
	}
	out := make([]byte, 0, size)
	out = appendBytes(out, []byte(b.From))
	out = binary.AppendUvarint(out, b.Incarnation)
	out = binary.AppendUvarint(out, b.Seq)
	out = binary.AppendUvarint(out, uint64(len(b.Messages)))
	for i := range b.Messages {
		m := &b.Messages[i]
		kind := byte(pubsub.Channel)
		if m.shard {
			kind = byte(pubsub.Shard)
		}
		out = append(out, kind)
		out = appendBytes(out, []byte(m.channel))
		out = appendBytes(out, m.payload)
	}
	return out
}

func appendBytes(out, b []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

// unmarshal decodes a batch; the payloads alias data.
func (b *publishBatch) unmarshal(data []byte) error {
	d := publishDecoder{data: data}
	b.From = NodeID(d.bytes())
	b.Incarnation = d.uvarint()
	b.Seq = d.uvarint()
	count := d.uvarint()
	if count > uint64(len(d.data)) { // every message takes at least one byte
		return errPublishBatch
	}
	b.Messages = make([]publishedMessage, 0, count)
	for range count {
		kind := d.byte()
		m := publishedMessage{channel: string(d.bytes()), payload: d.bytes()}
		switch pubsub.Kind(kind) {
		case pubsub.Channel:
		case pubsub.Shard:
			m.shard = true
		default:
			d.bad = true
		}
		b.Messages = append(b.Messages, m)
	}
	if d.bad || len(d.data) != 0 {
		return errPublishBatch
	}
	return nil
}

// publishDecoder reads a batch's fields; once one is malformed, bad is set and the rest read as zero.
type publishDecoder struct {
	data []byte
	bad  bool
}

func (d *publishDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.data)
	if n <= 0 {
		d.bad, d.data = true, nil
		return 0
	}
	d.data = d.data[n:]
	return v
}

func (d *publishDecoder) byte() byte {
	if len(d.data) == 0 {
		d.bad = true
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return b
}

func (d *publishDecoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.data)) {
		d.bad, d.data = true, nil
		return nil
	}
	b := d.data[:n:n]
	d.data = d.data[n:]
	return b
}
