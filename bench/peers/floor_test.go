package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// TestFloorKeepsEveryCopy writes keys through every member of a floor cluster with 2 copies, then checks
// that each key reads back through every member and that its owner and the next member both hold it.
func TestFloorKeepsEveryCopy(t *testing.T) {
	ctx := context.Background()
	cl, err := startFloor(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	c := cl.(*floorCluster)
	clients := make([]client, members)
	for m := range members {
		if clients[m], err = c.client(m); err != nil {
			t.Fatal(err)
		}
		defer clients[m].close()
	}
	var keys []string
	owners := map[int]int{}
	for i := range 60 {
		key := fmt.Sprintf("k%d", i)
		keys = append(keys, key)
		owners[c.ownerOf(key)]++
		if err := clients[i%members].put(ctx, key, []byte("v-"+key)); err != nil {
			t.Fatal(err)
		}
	}
	if len(owners) != members {
		t.Fatalf("keys spread over owners %v, want all %d", owners, members)
	}
	for _, key := range keys {
		owner := c.ownerOf(key)
		for _, m := range []int{owner, (owner + 1) % members} {
			if v, ok := c.members[m].get(key); !ok || !bytes.Equal(v, []byte("v-"+key)) {
				t.Fatalf("member %d holds %q as %q (found %v), want its copy", m, key, v, ok)
			}
		}
		if _, ok := c.members[(owner+2)%members].get(key); ok {
			t.Fatalf("a third member holds %q with 2 copies", key)
		}
		for m := range members {
			v, err := clients[m].get(ctx, key)
			if err != nil || !bytes.Equal(v, []byte("v-"+key)) {
				t.Fatalf("get %q through member %d: %q, %v", key, m, v, err)
			}
		}
	}
	for m := range members {
		failed, err := clients[m].getMany(ctx, append(keys, "missing"))
		if err != nil || failed != 1 {
			t.Fatalf("getMany through member %d: %d failed, %v; want only the missing key", m, failed, err)
		}
	}
}
