// Package rawio reads and writes non-blocking TCP sockets with raw system calls, waiting on the runtime's
// poller only when a socket is not ready.
//
// A plain net.Conn read or write announces every system call to the scheduler, which on an otherwise idle
// process wakes its monitor thread each time: at one request per read, that wake-up costs more than the
// request itself. A read or write of a non-blocking socket never blocks, so the announcement is not needed.
// Deadlines set on the connection still bound every wait.
package rawio
