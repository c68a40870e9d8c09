package zaris

import (
	"bytes"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
)

// FuzzDecodeIntent checks that decodeIntent never panics and that what it accepts encodes back to the
// same bytes.
func FuzzDecodeIntent(f *testing.F) {
	f.Add((&intent{txn: "t", anchor: "a", deadline: 5, action: intentPut, value: []byte("v"), ttl: 9}).encode())
	f.Add((&intent{txn: "t", anchor: "", action: intentDelete}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := decodeIntent(b)
		if err != nil {
			return
		}
		if again := in.encode(); !bytes.Equal(again, b) {
			again, err := decodeIntent(again)
			if err != nil || again.txn != in.txn || again.anchor != in.anchor || again.deadline != in.deadline ||
				again.action != in.action || !bytes.Equal(again.value, in.value) || again.ttl != in.ttl {
				t.Fatalf("round trip of %+v gave %+v, %v", in, again, err)
			}
		}
	})
}

// FuzzDecodeTxnItems checks that decodeTxnItems never panics, on arguments as a peer may send them.
func FuzzDecodeTxnItems(f *testing.F) {
	f.Add(appendTxnItem(nil, &txnItem{op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("v")}}))
	f.Add(appendTxnItem(nil, &txnItem{op: kv.OpCheckVersion, req: kv.Request{Key: "k", Version: 7}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := decodeTxnItems([][]byte{b, b})
		if err == nil && len(items) != 2 {
			t.Fatalf("decoded %d items from 2", len(items))
		}
	})
}
