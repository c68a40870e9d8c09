package kv

import (
	"bytes"
	"strings"
)

const (
	// NumSlots is the number of hash slots, as in Redis Cluster.
	NumSlots = 16384
	slotBits = 14 // NumSlots == 1 << slotBits
)

// KeySlot returns the Redis Cluster slot of key: byte for byte what CLUSTER KEYSLOT returns. When key holds a
// hash tag (the bytes between its first '{' and the first '}' after it, if there is at least one), only the tag
// is hashed, so keys that share a tag share a slot.
func KeySlot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 { // n == 0: "{}" is no tag
			key = key[open+1 : open+1+n]
		}
	}
	return CRC16(key) & (NumSlots - 1)
}

// KeySlotBytes is KeySlot for a byte slice. It neither allocates nor copies key.
func KeySlotBytes(key []byte) uint16 {
	if open := bytes.IndexByte(key, '{'); open >= 0 {
		if n := bytes.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return CRC16(key) & (NumSlots - 1)
}

// CRC16Tables[k][b] is the CRC16/XMODEM register (polynomial 0x1021, initial value 0, no reflection, no final
// xor) after feeding byte b into a zero register and then k zero bytes. Table 0 is the classic byte-at-a-time
// table. Because the CRC is linear, eight message bytes can be folded with eight independent lookups in tables
// 7..0, which removes most of the serial dependency of the byte loop, where each lookup waits for the previous
// one (see BenchmarkCRC16).
var CRC16Tables = makeCRC16Tables()

func makeCRC16Tables() (t [8][256]uint16) {
	for b := range 256 {
		reg := uint16(b) << 8
		for range 8 {
			if reg&0x8000 != 0 {
				reg = reg<<1 ^ 0x1021
			} else {
				reg <<= 1
			}
		}
		t[0][b] = reg
	}
	for k := 1; k < len(t); k++ {
		for b := range 256 {
			prev := t[k-1][b]
			t[k][b] = prev<<8 ^ t[0][prev>>8] // one more zero byte
		}
	}
	return t
}

// CRC16 returns the CRC16/XMODEM of data, eight bytes per step and then one byte at a time.
func CRC16[K ~string | ~[]byte](data K) uint16 {
	tab := &CRC16Tables
	var crc uint16
	for len(data) >= 8 {
		// The register's two bytes combine with the first two message bytes; the other six enter from zero.
		crc = tab[7][byte(crc>>8)^data[0]] ^ tab[6][byte(crc)^data[1]] ^
			tab[5][data[2]] ^ tab[4][data[3]] ^ tab[3][data[4]] ^
			tab[2][data[5]] ^ tab[1][data[6]] ^ tab[0][data[7]]
		data = data[8:]
	}
	for i := 0; i < len(data); i++ {
		crc = crc<<8 ^ tab[0][byte(crc>>8)^data[i]]
	}
	return crc
}
