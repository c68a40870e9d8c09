// Package transport is the Zaris data-plane wire: request/response calls between peers over one
// multiplexed TCP connection per peer, independent of what the payloads mean.
//
// # Wire format
//
// Each frame is a 4-byte big-endian body length followed by the body, a msgpack array
// [kind, request id, op, payload]. The kind is 1 (request), 2 (response), 3 (error, the payload being the
// handler's message as text) or 4 (goaway, below). The id is a uint64 chosen by the client and echoed by
// the server, op a uint16 the layer above defines, and the payload msgpack bin.
//
// A body longer than MaxFrameSize, or not exactly such an array, closes the connection (ErrFrameTooLarge,
// ErrMalformedFrame). An oversized length prefix is refused before any of its body is read, and bodies are
// read incrementally, so a bare prefix makes a peer allocate at most 64 KiB, or twice what has arrived.
//
// A server that stops reading a connection it would otherwise keep sends a goaway, whose op says why
// (1: idle, 2: too many connections), after the answers to every request it has read, then hangs up. Every
// call still waiting on that connection was therefore never read.
//
// # Connections
//
// A Client owns at most one connection to its peer. Calls on it are pipelined: each is written as soon as
// it is made and answered in whatever order the server finishes. Writes are coalesced: frames go into a
// shared buffer and whoever holds the flush duty writes everything queued with one call, so frames queued
// while a write is in flight leave together in the next (see ClientStats.Flushes and FramesWritten). On a
// server the answering handler holds the duty. On a client a writer goroutine does, except that a call
// with no other in progress writes its own frame when the socket takes it at once. TCP connections are
// read and written with raw system calls on Linux (internal/rawio). The server runs each request in a
// goroutine of its own, a worker that a connection keeps waiting for its next request once it has answered
// (up to eight a connection, 256 a server), so that most requests start on a worker whose stack has
// already grown. Behind a Mux, clients set Options.MuxByte.
//
// # Bounds
//
// A Server holds what its peers send within its Options, whoever they are (see ServerStats):
//
//   - MaxConns connections; one more is sent a goaway at once.
//   - MaxConnRequests requests in progress per connection and MaxRequests per Server. A request beyond
//     either waits, and its connection is not read meanwhile: a peer pipelining faster than the handlers
//     answer fills its own socket, not the server's memory. Answers queue behind a connection's writer up
//     to 4 MiB; beyond, handlers wait, holding their request slots.
//   - MaxBufferedBytes of request frames being read or waiting for a handler: each frame claims its length
//     when its prefix arrives and its connection is not read on until the claim fits. Frames of at most
//     64 KiB claim from a pool of their own (a quarter of the bytes, when a largest frame still fits in
//     the rest), so large frames announced and never sent cannot stall them. With the read
//     buffer of 32 KiB per connection, a Server holds at most MaxConns*32 KiB + MaxBufferedBytes of
//     requests that no handler has taken yet.
//   - IdleTimeout: a connection with no request in progress or arriving for that long is sent a goaway.
//   - ReadTimeout: a frame must arrive whole within it of its first byte, or the connection is cut
//     (ErrFrameTimeout); time spent waiting for MaxBufferedBytes does not count.
//   - WriteTimeout: every write must complete within it, on either side, or the connection is cut; a peer
//     that reads no answers is thus cut off.
//
// Both timeouts grant between three quarters of their value and all of it: a deadline set for an earlier
// frame or write is kept while it grants that much, sparing a timer update per read and per write.
//
// Streams of other protocols on a Mux, which no Server reads, are bounded by LimitListener; the Mux itself
// holds at most DefaultMaxHandshakes connections waiting for their first byte.
//
// # What an error says about the request
//
//   - nil or *RemoteError: the peer's handler ran and answered.
//   - ErrUnreachable (*DialError): certainly not sent. The dial failed, the server refused the connection
//     (ErrTooManyConns), or the Client is backing off after recent failures.
//   - ErrFrameTooLarge from Call: certainly not sent; the connection is unaffected.
//   - ErrClosed on its own: the Client was closed before the call; not sent.
//   - ErrConnectionLost (*ConnError): the connection failed after the request was queued; it may or may not
//     have been applied. Closing the Client fails in-flight calls this way too, with ErrClosed as the cause.
//   - context.Canceled or context.DeadlineExceeded: the caller stopped waiting; if the request had been
//     queued it may still be applied, and its late response is dropped.
//
// Calls that need a connection while a dial is in progress wait for it, within their own context and the
// dial's Options.DialTimeout. After a lost connection that had answered anything, the next Call redials at
// once. Otherwise dials back off exponentially, with jitter, between Options.RedialMin and RedialMax, and
// Calls during the backoff fail at once with a DialError.
//
// Calls caught by a goaway were never read. After an idle close Call resends them on a new connection.
// After a refusal the Client backs off and they fail with a DialError for ErrTooManyConns.
//
// # Faults
//
// Faults wraps the Dialer of each node in an in-process cluster to stall, delay or cut links between named
// nodes, one direction at a time, for tests.
package transport
