package main

import "context"

// members is how many members each cluster under test has.
const members = 3

// cluster is one running cluster of a system under test.
type cluster interface {
	// client returns a handle on member m (0 to members-1) for one load goroutine.
	client(m int) (client, error)
	// close stops every member and waits for what they started.
	close() error
}

// client is what a load goroutine calls; each goroutine has its own.
type client interface {
	put(ctx context.Context, key string, value []byte) error
	get(ctx context.Context, key string) ([]byte, error)
	// getMany reads keys in one batch and returns how many of them it could not read.
	getMany(ctx context.Context, keys []string) (failed int, err error)
	close()
}

// system names a system under test and how to start a cluster of it.
type system struct {
	name string
	// start starts a cluster keeping copies copies of every key, logging into sink.
	start func(ctx context.Context, copies int, sink *logSink) (cluster, error)
	// notes returns lines about a running cluster worth printing after the table; nil when none.
	notes func(c cluster) []string
}

var systems = map[string]system{
	"zaris": {name: "zaris", start: startZaris, notes: zarisNotes},
	"olric": {name: "olric", start: startOlric, notes: olricNotes},
	"floor": {name: "floor", start: startFloor},
}
