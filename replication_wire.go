package zaris

import (
	"encoding/binary"
	"fmt"

	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/durability"
)

// The kv.OpReplicate messages are encoded by hand, field by field, like the kv and batch messages
// (kv_wire.go, batch_wire.go): every replicated write travels in one, and reflection costs several times
// what encoding by hand does. The bytes are those the reflective codec writes, so either codec reads the
// other's output. replicateRequest, replicateReply, segmentSnapshot and pullRequest are msgpack arrays of
// their fields in declaration order; durability.Op and durability.Entry, which have no msgpack tags, are
// maps from field name to value in declaration order. uint64, uint32, uint8 and int64 fields take their
// full width and int fields the fewest bytes; nil slices, maps and pointers are msgpack nil; maps of ints
// go in iteration order. Readers skip array fields past those they know and map entries they do not know,
// but refuse an op or entry with fewer known entries than its fields: every writer sends them all.
const (
	replicateRequestFields = 8
	replicateReplyFields   = 8
	segmentSnapshotFields  = 6
	pullRequestFields      = 2
	opFieldCount           = 9
	entryFieldCount        = 5

	// replicateRequestOverhead bounds a request's bytes beyond its sender's name, snapshots, ops, probes and
	// epochs: array header, name header, sender incarnation, the four headers, pull, incarnation.
	replicateRequestOverhead = 1 + 5 + 9 + 4*5 + pullRequestSize + 9
	// replicateReplyOverhead bounds a reply's bytes beyond its maps and snapshots: array header, status,
	// epoch, segment, incarnation, the three headers, map index.
	replicateReplyOverhead = 1 + 2 + 9 + 9 + 9 + 3*5 + 9
	// pullRequestSize bounds an encoded pullRequest: array header, segment, part.
	pullRequestSize = 1 + 9 + 9
	// snapshotWireOverhead bounds a snapshot's bytes beyond its entries: array header, segment, revision,
	// epoch, entries header, part, more.
	snapshotWireOverhead = 1 + 9 + 9 + 9 + 5 + 9 + 1
	// opWireOverhead bounds an op's bytes beyond its key and value: map header, the nine names with their
	// headers, segment, revision, epoch, kind, key header, value header, expiry, version, time.
	opWireOverhead = 1 + opFieldCount +
		len("Segment"+"Revision"+"Epoch"+"Kind"+"Key"+"Value"+"ExpireAt"+"Version"+"Time") +
		5 + 9 + 9 + 2 + 5 + 5 + 9 + 9 + 9
	// entryWireOverhead bounds an entry's bytes beyond its key and value: map header, the five names with
	// their headers, key header, value header, expiry, version, kind.
	entryWireOverhead = 1 + entryFieldCount + len("Key"+"Value"+"ExpireAt"+"Version"+"Kind") + 5 + 5 + 9 + 9 + 2
	// intMapEntrySize bounds one entry of a map of ints to uint64s.
	intMapEntrySize = 9 + 9

	// The fewest bytes an element of each kind takes as its reader accepts it. They bound the count an
	// array header may claim before anything is allocated. An op or an entry holds all its fields, each
	// at least a name of three letters and a one-byte value.
	opLeastBytes       = 1 + opFieldCount*(1+3+1)
	entryLeastBytes    = 1 + entryFieldCount*(1+3+1)
	snapshotLeastBytes = 1 + segmentSnapshotFields
	intLeastBytes      = 1
	// mapEntryLeastBytes is the fewest bytes of a map entry: a one-byte key and a one-byte value.
	mapEntryLeastBytes = 2
)

// sizeBound bounds the encoded size of r.
func (r *replicateRequest) sizeBound() int {
	return replicateRequestOverhead + len(r.From) + snapshotsSize(r.Snapshots) + opsSize(r.Ops) +
		9*len(r.Probe) + intMapEntrySize*len(r.Epochs)
}

// sizeBound bounds the encoded size of r.
func (r *replicateReply) sizeBound() int {
	return replicateReplyOverhead + intMapEntrySize*(len(r.Revisions)+len(r.Lines)) + snapshotsSize(r.Snapshots)
}

// snapshotsSize bounds the encoded size of snaps beyond their array header.
func snapshotsSize(snaps []segmentSnapshot) int {
	n := 0
	for i := range snaps {
		n += snapshotWireOverhead
		for j := range snaps[i].Entries {
			e := &snaps[i].Entries[j]
			n += entryWireOverhead + len(e.Key) + len(e.Value)
		}
	}
	return n
}

// opsSize bounds the encoded size of ops beyond their array header.
func opsSize(ops []durability.Op) int {
	n := 0
	for i := range ops {
		n += opWireOverhead + len(ops[i].Key) + len(ops[i].Value)
	}
	return n
}

// appendMsg appends the encoded request to dst.
func (r *replicateRequest) appendMsg(dst []byte) []byte {
	dst = msgp.AppendArrayHeader(dst, replicateRequestFields)
	dst = msgp.AppendString(dst, string(r.From))
	dst = appendFullUint64(dst, r.FromIncarnation)
	dst = appendSnapshots(dst, r.Snapshots)
	dst = appendOps(dst, r.Ops)
	dst = appendInts(dst, r.Probe)
	dst = appendIntMap(dst, r.Epochs)
	dst = appendPull(dst, r.Pull)
	return appendFullUint64(dst, r.Incarnation)
}

// marshal returns the encoded request in a buffer of its own.
func (r *replicateRequest) marshal() []byte {
	return r.appendMsg(make([]byte, 0, r.sizeBound()))
}

// decodeMsg replaces r with the request encoded in b. Errors wrap ErrInvalidRequest. Keys and values are
// copies: a replica keeps them in its store and op log, where one aliasing b would keep all of b alive.
func (r *replicateRequest) decodeMsg(b []byte) error {
	w := wireReader{b: b}
	n := w.fields(replicateRequestFields)
	*r = replicateRequest{
		From:            NodeID(w.string()),
		FromIncarnation: w.uint64(),
		Snapshots:       w.snapshots(),
		Ops:             w.ops(),
		Probe:           w.ints(),
		Epochs:          w.intMap(),
		Pull:            w.pull(),
		Incarnation:     w.uint64(),
	}
	w.skip(n - replicateRequestFields)
	if err := w.done("replicate request"); err != nil {
		*r = replicateRequest{}
		return err
	}
	return nil
}

// appendMsg appends the encoded reply to dst.
func (r *replicateReply) appendMsg(dst []byte) []byte {
	dst = msgp.AppendArrayHeader(dst, replicateReplyFields)
	dst = appendFullUint8(dst, uint8(r.Status))
	dst = appendFullUint64(dst, r.Epoch)
	dst = appendInt(dst, r.Segment)
	dst = appendFullUint64(dst, r.Incarnation)
	dst = appendIntMap(dst, r.Revisions)
	dst = appendIntMap(dst, r.Lines)
	dst = appendSnapshots(dst, r.Snapshots)
	return appendFullUint64(dst, r.MapIndex)
}

// marshal returns the encoded reply in a buffer of its own.
func (r *replicateReply) marshal() []byte {
	return r.appendMsg(make([]byte, 0, r.sizeBound()))
}

// decodeMsg replaces r with the reply encoded in b. Keys and values are copies, as for
// replicateRequest.decodeMsg: a pulled snapshot goes to the store. Errors wrap ErrInvalidRequest.
func (r *replicateReply) decodeMsg(b []byte) error {
	w := wireReader{b: b}
	n := w.fields(replicateReplyFields)
	*r = replicateReply{
		Status:      Status(w.uint8()),
		Epoch:       w.uint64(),
		Segment:     w.int(),
		Incarnation: w.uint64(),
		Revisions:   w.intMap(),
		Lines:       w.intMap(),
		Snapshots:   w.snapshots(),
		MapIndex:    w.uint64(),
	}
	w.skip(n - replicateReplyFields)
	if err := w.done("replicate reply"); err != nil {
		*r = replicateReply{}
		return err
	}
	return nil
}

// appendSnapshots writes nil snapshots as msgpack nil and any others as an array of snapshots.
func appendSnapshots(dst []byte, snaps []segmentSnapshot) []byte {
	if snaps == nil {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendArrayHeader(dst, uint32(len(snaps)))
	for i := range snaps {
		s := &snaps[i]
		dst = msgp.AppendArrayHeader(dst, segmentSnapshotFields)
		dst = appendInt(dst, s.Segment)
		dst = appendFullUint64(dst, s.Revision)
		dst = appendFullUint64(dst, s.Epoch)
		dst = appendEntries(dst, s.Entries)
		dst = appendInt(dst, s.Part)
		dst = msgp.AppendBool(dst, s.More)
	}
	return dst
}

// snapshots reads what appendSnapshots wrote.
func (r *wireReader) snapshots() []segmentSnapshot {
	return readArray(r, snapshotLeastBytes, r.snapshot)
}

// snapshot reads one snapshot into s.
func (r *wireReader) snapshot(s *segmentSnapshot) {
	fields := r.fields(segmentSnapshotFields)
	*s = segmentSnapshot{
		Segment:  r.int(),
		Revision: r.uint64(),
		Epoch:    r.uint64(),
		Entries:  r.entries(),
		Part:     r.int(),
		More:     r.bool(),
	}
	r.skip(fields - segmentSnapshotFields)
}

// appendEntries writes nil entries as msgpack nil and any others as an array of maps of their fields.
func appendEntries(dst []byte, entries []durability.Entry) []byte {
	if entries == nil {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendArrayHeader(dst, uint32(len(entries)))
	for i := range entries {
		e := &entries[i]
		dst = msgp.AppendMapHeader(dst, entryFieldCount)
		dst = msgp.AppendString(appendFieldName(dst, "Key"), e.Key)
		dst = appendValue(appendFieldName(dst, "Value"), e.Value)
		dst = appendFullInt64(appendFieldName(dst, "ExpireAt"), e.ExpireAt)
		dst = appendFullUint64(appendFieldName(dst, "Version"), e.Version)
		dst = appendFullUint8(appendFieldName(dst, "Kind"), e.Kind)
	}
	return dst
}

// entries reads what appendEntries wrote.
func (r *wireReader) entries() []durability.Entry {
	return readArray(r, entryLeastBytes, r.entry)
}

// entry reads one entry into e: a map of its fields by name, holding each of them.
func (r *wireReader) entry(e *durability.Entry) {
	known := 0
	for range r.mapLen() {
		switch string(r.stringBytes()) {
		case "Key":
			e.Key = r.string()
		case "Value":
			e.Value = r.ownedValue()
		case "ExpireAt":
			e.ExpireAt = r.int64()
		case "Version":
			e.Version = r.uint64()
		case "Kind":
			e.Kind = r.uint8()
		default:
			r.skip(1)
			continue
		}
		known++
	}
	r.wantFields("entry", known, entryFieldCount)
}

// appendOps writes nil ops as msgpack nil and any others as an array of maps of their fields.
func appendOps(dst []byte, ops []durability.Op) []byte {
	if ops == nil {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendArrayHeader(dst, uint32(len(ops)))
	for i := range ops {
		op := &ops[i]
		dst = msgp.AppendMapHeader(dst, opFieldCount)
		dst = appendFullUint32(appendFieldName(dst, "Segment"), op.Segment)
		dst = appendFullUint64(appendFieldName(dst, "Revision"), op.Revision)
		dst = appendFullUint64(appendFieldName(dst, "Epoch"), op.Epoch)
		dst = appendFullUint8(appendFieldName(dst, "Kind"), uint8(op.Kind))
		dst = msgp.AppendString(appendFieldName(dst, "Key"), op.Key)
		dst = appendValue(appendFieldName(dst, "Value"), op.Value)
		dst = appendFullInt64(appendFieldName(dst, "ExpireAt"), op.ExpireAt)
		dst = appendFullUint64(appendFieldName(dst, "Version"), op.Version)
		dst = appendFullInt64(appendFieldName(dst, "Time"), op.Time)
	}
	return dst
}

// ops reads what appendOps wrote.
func (r *wireReader) ops() []durability.Op {
	return readArray(r, opLeastBytes, r.op)
}

// op reads one op into op: a map of its fields by name, holding each of them.
func (r *wireReader) op(op *durability.Op) {
	known := 0
	for range r.mapLen() {
		switch string(r.stringBytes()) {
		case "Segment":
			op.Segment = r.uint32()
		case "Revision":
			op.Revision = r.uint64()
		case "Epoch":
			op.Epoch = r.uint64()
		case "Kind":
			op.Kind = durability.OpKind(r.uint8())
		case "Key":
			op.Key = r.string()
		case "Value":
			op.Value = r.ownedValue()
		case "ExpireAt":
			op.ExpireAt = r.int64()
		case "Version":
			op.Version = r.uint64()
		case "Time":
			op.Time = r.int64()
		default:
			r.skip(1)
			continue
		}
		known++
	}
	r.wantFields("op", known, opFieldCount)
	if r.err == nil {
		r.err = durability.CheckOp(op)
	}
}

// appendInts writes nil ints as msgpack nil and any others as an array of ints in the fewest bytes.
func appendInts(dst []byte, ints []int) []byte {
	if ints == nil {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendArrayHeader(dst, uint32(len(ints)))
	for _, v := range ints {
		dst = appendInt(dst, v)
	}
	return dst
}

// ints reads what appendInts wrote.
func (r *wireReader) ints() []int {
	return readArray(r, intLeastBytes, func(v *int) { *v = r.int() })
}

// appendIntMap writes a nil map as msgpack nil and any other as a map of ints in the fewest bytes to
// uint64s in full.
func appendIntMap(dst []byte, m map[int]uint64) []byte {
	if m == nil {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendMapHeader(dst, uint32(len(m)))
	for k, v := range m {
		dst = appendFullUint64(appendInt(dst, k), v)
	}
	return dst
}

// intMap reads what appendIntMap wrote, refusing a count the bytes left cannot hold.
func (r *wireReader) intMap() map[int]uint64 {
	if r.readNil() {
		return nil
	}
	n := r.mapLen()
	if r.err != nil {
		return nil
	}
	m := make(map[int]uint64, n)
	for range n {
		k := r.int()
		m[k] = r.uint64()
	}
	return m
}

// appendPull writes a nil pull as msgpack nil and any other as an array of its fields.
func appendPull(dst []byte, p *pullRequest) []byte {
	if p == nil {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendArrayHeader(dst, pullRequestFields)
	dst = appendInt(dst, p.Segment)
	return appendInt(dst, p.Part)
}

// pull reads what appendPull wrote.
func (r *wireReader) pull() *pullRequest {
	if r.readNil() {
		return nil
	}
	n := r.fields(pullRequestFields)
	p := &pullRequest{Segment: r.int(), Part: r.int()}
	r.skip(n - pullRequestFields)
	return p
}

// appendFieldName writes the name of a field of a struct the reflective codec writes as a map. Every
// name is shorter than 32 bytes, so it is a fixstr.
func appendFieldName(dst []byte, name string) []byte {
	return append(append(dst, 0xa0|byte(len(name))), name...)
}

// appendInt writes v in the fewest bytes, non-negative values as unsigned integers, as the reflective
// codec writes an int.
func appendInt(dst []byte, v int) []byte {
	if v >= 0 {
		return msgp.AppendUint64(dst, uint64(v))
	}
	return msgp.AppendInt64(dst, int64(v))
}

// The full-width writers write a number in all the bytes of its type, whatever its value, as the
// reflective codec writes fixed-size fields.
func appendFullUint8(dst []byte, v uint8) []byte { return append(dst, 0xcc, v) }
func appendFullUint32(dst []byte, v uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, 0xce), v)
}
func appendFullUint64(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}
func appendFullInt64(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(v))
}

func (r *wireReader) uint32() uint32 { return readField(r, msgp.ReadUint32Bytes) }

// mapLen reads a map header, refusing a count the bytes left cannot hold; 0 after an error.
func (r *wireReader) mapLen() int {
	if r.err != nil {
		return 0
	}
	var n uint32
	n, r.b, r.err = msgp.ReadMapHeaderBytes(r.b)
	if r.err == nil && uint64(n)*mapEntryLeastBytes > uint64(len(r.b)) {
		r.err = fmt.Errorf("%d map entries in %d bytes", n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// wantFields refuses a map of a struct's fields that named fewer than want of them.
func (r *wireReader) wantFields(what string, known, want int) {
	if r.err == nil && known < want {
		r.err = fmt.Errorf("%s has %d known fields, want %d", what, known, want)
	}
}

// ownedValue reads what appendValue wrote into memory of its own, an empty value staying empty.
func (r *wireReader) ownedValue() []byte {
	if r.readNil() {
		return nil
	}
	v := readField(r, msgp.ReadBytesZC)
	if r.err != nil {
		return nil
	}
	return append(make([]byte, 0, len(v)), v...)
}
