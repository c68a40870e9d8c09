package main

import (
	"fmt"
	"os"

	"github.com/zaris-go/zaris"
)

func main() {
	l := zaris.Layout{Segments: zaris.DefaultSegments, Partitions: zaris.DefaultPartitions}
	for _, k := range os.Args[1:] {
		s := l.KeySegment(k)
		fmt.Println(k, s, l.SegmentPartition(s))
	}
}
