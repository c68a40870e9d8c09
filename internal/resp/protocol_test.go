package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
)

// chunkReader hands out its data a few bytes at a time, as a slow network would.
type chunkReader struct {
	data  []byte
	chunk int
}

// rejectedMark starts the entry readAll records for a command the reader refused.
const rejectedMark = "\x00rejected"

// readAll parses every command of src; it returns them (copied, a refused command as rejectedMark and its
// error) and the error that ended the stream.
func readAll(src io.Reader, lim respLimits) ([][]string, error) {
	rd := newRESPReader(src, lim, nil)
	var out [][]string
	for {
		args, err := rd.next()
		var rejected *respRejection
		if errors.As(err, &rejected) {
			out = append(out, []string{rejectedMark, rejected.msg})
			continue
		}
		if err != nil {
			return out, err
		}
		if len(args) == 0 || len(args) > lim.maxArgs {
			return out, fmt.Errorf("command with %d arguments", len(args))
		}
		cmd := make([]string, len(args))
		for i, a := range args {
			if len(a) > lim.maxBulk {
				return out, fmt.Errorf("argument of %d bytes", len(a))
			}
			cmd[i] = string(a)
		}
		out = append(out, cmd)
		if len(rd.buf) > max(respInitialBuffer, lim.maxQuery+respMaxHeaderLine) {
			return out, fmt.Errorf("buffer grew to %d bytes", len(rd.buf))
		}
	}
}

func TestRESPReaderStreaming(t *testing.T) {
	lim := newRESPLimits(1<<20, 4<<20)
	big := strings.Repeat("x", 300<<10)
	input := encodeCommand("SET", "k", big) + "PING  hello\r\n\r\n" + "*0\r\n" + encodeCommand("GET", "k") + "*-1\r\n" + encodeCommand("ECHO", "")
	want := [][]string{{"SET", "k", big}, {"PING", "hello"}, {"GET", "k"}, {"ECHO", ""}}
	for _, chunk := range []int{1, 7, 4096, len(input)} {
		got, err := readAll(&chunkReader{data: []byte(input), chunk: chunk}, lim)
		if !errors.Is(err, io.EOF) || !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("chunk %d: %d commands, err %v", chunk, len(got), err)
		}
	}
}

// TestRESPInlineSplit checks inline commands split as Redis splits them (TestRESPMatchesRedis compares with
// a real server where one is installed).
func TestRESPInlineSplit(t *testing.T) {
	cases := []struct {
		line string
		want []string // nil: unbalanced quotes
	}{
		{`SET "a b" c`, []string{"SET", "a b", "c"}},
		{`  GET   k  `, []string{"GET", "k"}},
		{`SET 'it\'s' v`, []string{"SET", "it's", "v"}},
		{`ECHO 'a\nb'`, []string{"ECHO", `a\nb`}},
		{`ECHO "a\nb\t\r\b\a\q\\\""`, []string{"ECHO", "a\nb\t\r\b\aq\\\""}},
		{`ECHO "\x41\x6a\x4" "\xzz"`, []string{"ECHO", "Ajx4", "xzz"}},
		{`SET x"y z" 1`, []string{"SET", "xy z", "1"}},
		{`ECHO "" ''`, []string{"ECHO", "", ""}},
		{"ECHO a\x00b c", []string{"ECHO", "a"}},
		{"\v\fECHO b\vc", []string{"ECHO", "b\vc"}},
		{`GET "abc`, nil},
		{`GET 'abc`, nil},
		{`GET "a"b`, nil},
		{`GET 'a'b`, nil},
		{`GET "a\`, nil},
		{"GET \"a\x00\"", nil},
	}
	for _, tc := range cases {
		line := []byte(tc.line)
		var got []string
		err := splitInline(line, func(start, end int) error {
			got = append(got, string(line[start:end]))
			return nil
		})
		switch {
		case tc.want == nil && !errors.Is(err, errRESPProtocol):
			t.Errorf("%q: %q, %v; want unbalanced quotes", tc.line, got, err)
		case tc.want != nil && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%q: %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
}

// FuzzRESPReader checks that any input, delivered in any chunking, parses the same way, never breaks the
// limits, and that every parsed command survives a round trip through its canonical encoding.
func FuzzRESPReader(f *testing.F) {
	f.Add([]byte(encodeCommand("SET", "k", "v")+encodeCommand("GET", "k")), uint8(1))
	f.Add([]byte("PING\r\n\r\n*0\r\n*-1\r\n"), uint8(3))
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$99999999999\r\n"), uint8(5))
	f.Add([]byte("*1\r\n$-1\r\n"), uint8(2))
	f.Add([]byte("SET \"a b\" 'c\\'d' \"\\x41\\n\"\r\nGET \"a\r\n"), uint8(4))
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\n"+strings.Repeat("v", 100)+"\r\nPING\r\n"), uint8(9))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		lim := respLimits{maxBulk: 64, maxArgs: 8, maxInline: 128, maxQuery: 512}
		whole, errWhole := readAll(bytes.NewReader(data), lim)
		pieces, errPieces := readAll(&chunkReader{data: data, chunk: int(chunk%16) + 1}, lim)
		if !slices.EqualFunc(whole, pieces, slices.Equal) {
			t.Fatalf("chunking changed the commands: %q vs %q", whole, pieces)
		}
		for _, err := range []error{errWhole, errPieces} {
			if !errors.Is(err, io.EOF) && !errors.Is(err, errRESPProtocol) {
				t.Fatalf("unexpected error %v", err)
			}
		}
		for _, cmd := range whole {
			if cmd[0] == rejectedMark {
				continue
			}
			again, err := readAll(strings.NewReader(encodeCommand(cmd...)), lim)
			if !errors.Is(err, io.EOF) || len(again) != 1 || !slices.Equal(again[0], cmd) {
				t.Fatalf("round trip of %q gave %q, %v", cmd, again, err)
			}
		}
	})
}

// TestRESPSlotRanges checks that CLUSTER replies merge neighbouring partitions of one owner and the same
// replicas, and leave out partitions nobody can serve over RESP.
func TestRESPSlotRanges(t *testing.T) {
	m := &Topology{
		Version: 1,
		Nodes: map[kv.NodeID]NodeAddrs{
			"a": {RESPAddr: "127.0.0.1:1"},
			"b": {RESPAddr: "127.0.0.1:2"},
			"c": {}, // no RESP endpoint
		},
		Partitions: []Partition{
			{First: 0, Last: 99, Owner: "a", Replicas: []kv.NodeID{"b"}}, {First: 100, Last: 199, Owner: "a", Replicas: []kv.NodeID{"b"}},
			{First: 200, Last: 249, Owner: "b"}, {First: 250, Last: 299, Owner: "b", Replicas: []kv.NodeID{"a"}},
			{First: 300, Last: 399, Owner: "c"}, {First: 400, Last: 499, Owner: "b", Unavailable: true},
			{First: 500, Last: kv.NumSlots - 1},
		},
	}
	got := slotRanges(m)
	want := []slotRange{{first: 0, last: 199, owner: "a", replicas: []kv.NodeID{"b"}}, {first: 200, last: 249, owner: "b"},
		{first: 250, last: 299, owner: "b", replicas: []kv.NodeID{"a"}}}
	if !slices.EqualFunc(got, want, func(x, y slotRange) bool {
		return x.first == y.first && x.last == y.last && x.owner == y.owner && slices.Equal(x.replicas, y.replicas)
	}) {
		t.Fatalf("slotRanges = %+v, want %+v", got, want)
	}
	if p := m.PartitionOf(250); p == nil || p.Owner != "b" {
		t.Fatalf("PartitionOf(250) = %+v, want the partition of b", p)
	}
	if id := RedisNodeID("a"); len(id) != 40 || id != RedisNodeID("a") || id == RedisNodeID("b") {
		t.Fatalf("node id %q is not a stable 40-hex-digit id", id)
	}
}

// TestRESPRefusals checks the Redis Cluster error for each status that keeps a node from serving a key.
func TestRESPRefusals(t *testing.T) {
	node := newFakeNode()
	var out bytes.Buffer
	conn := &respConn{srv: NewServer(node, fakeOptions()), wr: newRESPWriter(&out)}
	cases := []struct {
		reply kv.Reply
		want  string
	}{
		{kv.Reply{Status: kv.StatusMoved, Owner: "b"}, "-MOVED 7 127.0.0.1:7002"},
		{kv.Reply{Status: kv.StatusMoved, Owner: "unknown"}, "-CLUSTERDOWN Hash slot 7 is served by a node without a RESP endpoint"},
		{kv.Reply{Status: kv.StatusOwnershipChanging}, "-TRYAGAIN Ownership of hash slot 7 is changing, try again"},
		{kv.Reply{Status: kv.StatusPartitionUnavailable}, "-CLUSTERDOWN Hash slot 7 is not served"},
		{kv.Reply{Status: kv.StatusNotReady}, "-CLUSTERDOWN The cluster has no slot map yet"},
	}
	for _, tc := range cases {
		out.Reset()
		conn.refuse(7, tc.reply)
		conn.wr.flush()
		if got := strings.TrimSuffix(out.String(), "\r\n"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.reply.Status, got, tc.want)
		}
	}
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}
