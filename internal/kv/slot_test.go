package kv

//go:generate sh -c "cd ../.. && go run scripts/gen-keyslot-golden.go"

import (
	"bufio"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// readKeySlotGolden parses testdata/keyslot_golden.txt: "<slot> <Go-quoted key>" per line, '#' comments.
func readKeySlotGolden(t *testing.T) (keys []string, slots []uint16) {
	t.Helper()
	f, err := os.Open("testdata/keyslot_golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		num, quoted, ok := strings.Cut(text, " ")
		slot, err := strconv.ParseUint(num, 10, 16)
		if !ok || err != nil || slot >= NumSlots {
			t.Fatalf("golden line %d: bad slot in %q", line, text)
		}
		key, err := strconv.Unquote(quoted)
		if err != nil {
			t.Fatalf("golden line %d: bad key %s: %v", line, quoted, err)
		}
		keys, slots = append(keys, key), append(slots, uint16(slot))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, slots
}

func TestKeySlotGolden(t *testing.T) {
	keys, slots := readKeySlotGolden(t)
	if len(keys) < 2000 {
		t.Fatalf("golden file holds %d keys, want at least 2000", len(keys))
	}
	for i, key := range keys {
		if got := KeySlot(key); got != slots[i] {
			t.Errorf("KeySlot(%q) = %d, Redis says %d", key, got, slots[i])
		}
		if got := KeySlotBytes([]byte(key)); got != slots[i] {
			t.Errorf("KeySlotBytes(%q) = %d, Redis says %d", key, got, slots[i])
		}
	}
}

func TestKeySlotKnownValues(t *testing.T) {
	// 0x31C3 is the published CRC16/XMODEM check value of "123456789".
	if got := KeySlot("123456789"); got != 0x31C3 {
		t.Errorf(`KeySlot("123456789") = %#x, want 0x31c3`, got)
	}
	if KeySlot("") != 0 || KeySlotBytes(nil) != 0 {
		t.Error("the empty key must be in slot 0")
	}
	sameSlot := [][]string{
		{"{user1000}.following", "{user1000}.followers", "user1000"},
		{"foo{bar}", "{bar}", "bar", "x{bar}{zap}", "{bar}}"},
		{"{{a}}", "{a", "{{a}"}, // the tag runs from the first '{' to the next '}'
	}
	for _, group := range sameSlot {
		for _, k := range group[1:] {
			if KeySlot(k) != KeySlot(group[0]) {
				t.Errorf("KeySlot(%q) = %d, KeySlot(%q) = %d: want equal", k, KeySlot(k), group[0], KeySlot(group[0]))
			}
		}
	}
	if KeySlot("{}a") == KeySlot("a") {
		t.Error(`"{}a" must hash as a whole`)
	}
}

// referenceCRC16 is CRC16/XMODEM computed bit by bit, straight from its definition.
func referenceCRC16(data []byte) uint16 {
	var crc uint16
	for _, b := range data {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// referenceSlot applies the hash-tag rule with the standard library, then the bitwise CRC.
func referenceSlot(key []byte) uint16 {
	s := string(key)
	if open := strings.IndexByte(s, '{'); open >= 0 {
		if n := strings.IndexByte(s[open+1:], '}'); n > 0 {
			s = s[open+1 : open+1+n]
		}
	}
	return referenceCRC16([]byte(s)) % NumSlots
}

func TestCRC16MatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		for range 20 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			if got, want := CRC16(b), referenceCRC16(b); got != want {
				t.Fatalf("CRC16(% x) = %#04x, want %#04x", b, got, want)
			}
			if got, want := CRC16(string(b)), referenceCRC16(b); got != want {
				t.Fatalf("CRC16(%q) = %#04x, want %#04x", b, got, want)
			}
			if got, want := CRC16Bytewise(b), referenceCRC16(b); got != want {
				t.Fatalf("CRC16Bytewise(% x) = %#04x, want %#04x", b, got, want)
			}
		}
	}
}

// FuzzKeySlot compares KeySlot and KeySlotBytes with referenceSlot. Its seeds are in testdata/fuzz/FuzzKeySlot.
func FuzzKeySlot(f *testing.F) {
	f.Fuzz(func(t *testing.T, key []byte) {
		want := referenceSlot(key)
		if got := KeySlotBytes(key); got != want {
			t.Errorf("KeySlotBytes(%q) = %d, want %d", key, got, want)
		}
		if got := KeySlot(string(key)); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	})
}

var keySlotBenchKeys = []string{
	"user:1000:profil", "session:8f2a9c1b", "order:000000042", "cart:item:77781",
	"metrics:cpu:host", "k:0123456789abc", "feed:timeline:9", "lock:job:318842",
}

func BenchmarkKeySlot(b *testing.B) {
	b.ReportAllocs()
	var sink uint16
	for i := 0; b.Loop(); i++ {
		sink += KeySlot(keySlotBenchKeys[i&7])
	}
	_ = sink
}

func BenchmarkKeySlotBytes(b *testing.B) {
	keys := make([][]byte, len(keySlotBenchKeys))
	for i, k := range keySlotBenchKeys {
		keys[i] = []byte(k)
	}
	b.ReportAllocs()
	var sink uint16
	for i := 0; b.Loop(); i++ {
		sink += KeySlotBytes(keys[i&7])
	}
	_ = sink
}

func BenchmarkKeySlotHashTag(b *testing.B) {
	keys := []string{"{user1000}:follo", "order{42}:lines", "{cart:77781}:ite", "x{lock}:job:3188"}
	b.ReportAllocs()
	var sink uint16
	for i := 0; b.Loop(); i++ {
		sink += KeySlot(keys[i&3])
	}
	_ = sink
}

// BenchmarkCRC16 compares CRC16, eight bytes per step, with the classic byte-at-a-time table loop on a 16-byte
// key: the reason for the seven extra tables.
func BenchmarkCRC16(b *testing.B) {
	key := []byte(keySlotBenchKeys[0])
	b.Run("eight-bytes", func(b *testing.B) {
		var sink uint16
		for b.Loop() {
			sink += CRC16(key)
		}
		_ = sink
	})
	b.Run("byte-table", func(b *testing.B) {
		var sink uint16
		for b.Loop() {
			sink += CRC16Bytewise(key)
		}
		_ = sink
	})
}

func CRC16Bytewise(data []byte) uint16 {
	var crc uint16
	for _, c := range data {
		crc = crc<<8 ^ CRC16Tables[0][byte(crc>>8)^c]
	}
	return crc
}
