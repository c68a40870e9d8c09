package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"sync"
)

// The floor is the least a Go map spread over TCP does per operation: no framework, no routing table, no
// replication protocol. Each member keeps a map under a lock and serves it over plain TCP, a goroutine per
// connection, blocking reads and writes through bufio. A client serves its own member's keys in process and
// sends any other key's request to its owner on a connection of its own: one round trip, two goroutine
// wake-ups. With 2 copies or more an owner forwards each put to the next members on connections of the
// serving goroutine's own, one after the other, and answers once they have stored it. What it measures on a
// machine is the latency any Go implementation of one round trip per operation starts from.

const (
	floorGet     = 'G' // read a key
	floorPut     = 'P' // store a key at its owner, which forwards it to its replicas
	floorReplica = 'R' // store a key forwarded by its owner
	floorMany    = 'M' // read several keys of one owner
)

// floorCluster is a cluster of floor members on loopback.
type floorCluster struct {
	copies  int
	members []*floorMember
}

// floorMember is one member: its map, its listener and the connections it serves.
type floorMember struct {
	cluster *floorCluster
	index   int
	ln      net.Listener
	mu      sync.RWMutex
	data    map[string][]byte
	conns   sync.Map // net.Conn → struct{}, closed by close
	wg      sync.WaitGroup
}

func startFloor(_ context.Context, copies int, _ *logSink) (cluster, error) {
	c := &floorCluster{copies: copies}
	for i := range members {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		m := &floorMember{cluster: c, index: i, ln: ln, data: map[string][]byte{}}
		c.members = append(c.members, m)
		m.wg.Go(m.accept)
	}
	return c, nil
}

func (c *floorCluster) client(m int) (client, error) {
	return &floorClient{cluster: c, member: m, conns: make([]*floorConn, members)}, nil
}

func (c *floorCluster) close() error {
	for _, m := range c.members {
		m.ln.Close()
		m.conns.Range(func(conn, _ any) bool { conn.(net.Conn).Close(); return true })
		m.wg.Wait()
	}
	return nil
}

// ownerOf returns the member that owns key.
func (c *floorCluster) ownerOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % members)
}

func (m *floorMember) accept() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.conns.Store(conn, struct{}{})
		m.wg.Go(func() { m.serve(conn) })
	}
}

// serve answers conn's requests one after the other until it closes.
func (m *floorMember) serve(conn net.Conn) {
	defer conn.Close()
	peer := &floorClient{cluster: m.cluster, member: m.index, conns: make([]*floorConn, members)}
	defer peer.close()
	in, out := bufio.NewReader(conn), bufio.NewWriter(conn)
	for {
		op, key, value, err := readFloorRequest(in)
		if err != nil {
			return
		}
		switch op {
		case floorGet:
			v, ok := m.get(string(key))
			writeFloorValue(out, v, ok)
		case floorPut, floorReplica:
			if op == floorPut {
				if err := peer.replicate(string(key), value); err != nil {
					return
				}
			}
			m.put(string(key), value)
			writeFloorValue(out, nil, true)
		case floorMany:
			for _, k := range splitFloorKeys(key) {
				v, ok := m.get(k)
				writeFloorValue(out, v, ok)
			}
		default:
			return
		}
		if err := out.Flush(); err != nil {
			return
		}
	}
}

func (m *floorMember) get(key string) ([]byte, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.data[key]
	return v, ok
}

func (m *floorMember) put(key string, value []byte) {
	v := append([]byte(nil), value...)
	m.mu.Lock()
	m.data[key] = v
	m.mu.Unlock()
}

// floorConn is one client connection to a member, used by one goroutine at a time.
type floorConn struct {
	conn net.Conn
	in   *bufio.Reader
	out  *bufio.Writer
}

// floorClient is one load goroutine's (or one serving goroutine's) connections to the members.
type floorClient struct {
	cluster *floorCluster
	member  int
	conns   []*floorConn
}

func (c *floorClient) conn(m int) (*floorConn, error) {
	if fc := c.conns[m]; fc != nil {
		return fc, nil
	}
	conn, err := net.Dial("tcp", c.cluster.members[m].ln.Addr().String())
	if err != nil {
		return nil, err
	}
	fc := &floorConn{conn: conn, in: bufio.NewReader(conn), out: bufio.NewWriter(conn)}
	c.conns[m] = fc
	return fc, nil
}

// call sends one request to member m and reads one value back per key it reads.
func (c *floorClient) call(m int, op byte, key, value []byte, replies int) ([][]byte, error) {
	fc, err := c.conn(m)
	if err != nil {
		return nil, err
	}
	writeFloorRequest(fc.out, op, key, value)
	if err := fc.out.Flush(); err != nil {
		return nil, err
	}
	values := make([][]byte, replies)
	for i := range values {
		if values[i], err = readFloorValue(fc.in); err != nil {
			return nil, err
		}
	}
	return values, nil
}

// replicate stores key on the members after its owner, one after the other.
func (c *floorClient) replicate(key string, value []byte) error {
	owner := c.cluster.ownerOf(key)
	for i := 1; i < c.cluster.copies; i++ {
		if _, err := c.call((owner+i)%members, floorReplica, []byte(key), value, 1); err != nil {
			return err
		}
	}
	return nil
}

func (c *floorClient) put(_ context.Context, key string, value []byte) error {
	owner := c.cluster.ownerOf(key)
	if owner != c.member {
		_, err := c.call(owner, floorPut, []byte(key), value, 1)
		return err
	}
	if err := c.replicate(key, value); err != nil {
		return err
	}
	c.cluster.members[owner].put(key, value)
	return nil
}

func (c *floorClient) get(_ context.Context, key string) ([]byte, error) {
	owner := c.cluster.ownerOf(key)
	if owner == c.member {
		v, ok := c.cluster.members[owner].get(key)
		if !ok {
			return nil, fmt.Errorf("floor: %q not found", key)
		}
		return append([]byte(nil), v...), nil
	}
	values, err := c.call(owner, floorGet, []byte(key), nil, 1)
	if err != nil {
		return nil, err
	}
	if values[0] == nil {
		return nil, fmt.Errorf("floor: %q not found", key)
	}
	return values[0], nil
}

// getMany reads keys with one request per owner, the owners one after the other.
func (c *floorClient) getMany(ctx context.Context, keys []string) (int, error) {
	byOwner := make([][]string, members)
	for _, k := range keys {
		o := c.cluster.ownerOf(k)
		byOwner[o] = append(byOwner[o], k)
	}
	failed := 0
	for owner, ks := range byOwner {
		if len(ks) == 0 {
			continue
		}
		if owner == c.member {
			for _, k := range ks {
				if _, err := c.get(ctx, k); err != nil {
					failed++
				}
			}
			continue
		}
		values, err := c.call(owner, floorMany, joinFloorKeys(ks), nil, len(ks))
		if err != nil {
			return len(keys), err
		}
		for _, v := range values {
			if v == nil {
				failed++
			}
		}
	}
	return failed, nil
}

func (c *floorClient) close() {
	for _, fc := range c.conns {
		if fc != nil {
			fc.conn.Close()
		}
	}
}

// A request is its op, the key's length (2 bytes) and the value's (4 bytes), the key, then the value. A
// multi-get's key is its keys, each after its length (2 bytes).
func writeFloorRequest(w *bufio.Writer, op byte, key, value []byte) {
	var head [7]byte
	head[0] = op
	binary.BigEndian.PutUint16(head[1:], uint16(len(key)))
	binary.BigEndian.PutUint32(head[3:], uint32(len(value)))
	w.Write(head[:])
	w.Write(key)
	w.Write(value)
}

func readFloorRequest(r *bufio.Reader) (op byte, key, value []byte, err error) {
	var head [7]byte
	if _, err = io.ReadFull(r, head[:]); err != nil {
		return 0, nil, nil, err
	}
	key = make([]byte, binary.BigEndian.Uint16(head[1:]))
	value = make([]byte, binary.BigEndian.Uint32(head[3:]))
	if _, err = io.ReadFull(r, key); err != nil {
		return 0, nil, nil, err
	}
	_, err = io.ReadFull(r, value)
	return head[0], key, value, err
}

// A reply is one value per key read: a found flag, its length (4 bytes) and its bytes.
func writeFloorValue(w *bufio.Writer, v []byte, found bool) {
	var head [5]byte
	if found {
		head[0] = 1
	}
	binary.BigEndian.PutUint32(head[1:], uint32(len(v)))
	w.Write(head[:])
	w.Write(v)
}

// readFloorValue returns the value read, or nil when the key was not found.
func readFloorValue(r *bufio.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	v := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(r, v); err != nil || head[0] == 0 {
		return nil, err
	}
	return v, nil
}

func joinFloorKeys(keys []string) []byte {
	var b []byte
	for _, k := range keys {
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
	}
	return b
}

func splitFloorKeys(b []byte) []string {
	var keys []string
	for len(b) >= 2 {
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			break
		}
		keys = append(keys, string(b[2:2+n]))
		b = b[2+n:]
	}
	return keys
}
