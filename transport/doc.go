// Package transport is the Zaris data-plane wire: request/response calls between peers over one
// multiplexed TCP connection per peer, independent of what the payloads mean.
//
// # Wire format
//
// Each frame is a 4-byte big-endian body length followed by the body, a msgpack array
// [kind, request id, op, payload]: kind is 1 (request), 2 (response) or 3 (error, payload is the handler's
// message as text); the id is a uint64 chosen by the client and echoed by the server; op is a uint16 the
// layer above defines; the payload is msgpack bin. A body longer than MaxFrameSize, or one that is not
// exactly such an array, closes the connection (ErrFrameTooLarge, ErrMalformedFrame). Bodies are read
// incrementally, so a bare length prefix makes a peer allocate at most 64 KiB, or twice what has actually
// arrived.
//
// # Connections
//
// A Client owns at most one connection to its peer. Calls on it are pipelined: each is written as soon as
// it is made and answered in whatever order the server finishes. Writes are coalesced: frames go into a
// shared buffer and whoever holds the flush duty (a writer goroutine on the client, the answering handler
// on the server) writes everything queued with one call, so frames queued while a write is in flight leave
// together in the next (see ClientStats.Flushes and FramesWritten). The server runs each request in its
// own goroutine. Behind a Mux, clients set Options.MuxByte.
//
// # What an error says about the request
//
//   - nil or *RemoteError: the peer's handler ran and answered.
//   - ErrUnreachable (*DialError): certainly not sent. The dial failed, or the Client is backing off after
//     recent failures.
//   - ErrFrameTooLarge from Call: certainly not sent; the connection is unaffected.
//   - ErrClosed on its own: the Client was closed before the call; not sent.
//   - ErrConnectionLost (*ConnError): the connection failed after the request was queued; it may or may not
//     have been applied. Closing the Client fails in-flight calls this way too, with ErrClosed as the cause.
//   - context.Canceled or context.DeadlineExceeded: the caller stopped waiting; if the request had been
//     queued it may still be applied, and its late response is dropped.
//
// Calls that need a connection while a dial is in progress wait for that dial, bounded by their own
// context; the dial itself is bounded by Options.DialTimeout. After a lost connection the next Call
// redials at once if the connection had answered anything; otherwise dials back off exponentially (with
// jitter) between Options.RedialMin and RedialMax, and Calls during the backoff fail at once with a
// DialError rather than queueing behind it.
//
// # Faults
//
// Faults wraps the Dialer of each node in an in-process cluster to stall, delay or cut links between named
// nodes, one direction at a time, for tests.
package transport
