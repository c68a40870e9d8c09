package zaris

import (
	"net"
	"sync"

	"github.com/zaris-go/zaris/transport"
)

// dataPort is a node's one listening socket, which every peer reaches: its first byte splits it into the
// data lane (callers' key requests), the internal lane (requests that never wait on another node) and
// raft's. It also holds the dialer that reaches the other nodes' ports.
type dataPort struct {
	dialer   transport.Dialer
	listener net.Listener
	mux      *transport.Mux
	data     *transport.Server
	internal *transport.Server
	// lanes are the mux's listeners for data and internal, registered at open so that connections wait
	// for serve rather than being refused.
	lanes [2]net.Listener
}

// open splits ln, as secured, into its lanes, refusing peers whose greeting is incompatible with g; data
// and internal answer once serve runs.
func (p *dataPort) open(ln, secured net.Listener, g transport.Greeting, data, internal *transport.Server) {
	p.listener = ln
	p.mux = transport.NewMux(secured, transport.WithGreeting(g))
	p.data, p.internal = data, internal
	p.lanes = [2]net.Listener{p.mux.Listener(muxData), p.mux.Listener(muxInternal)}
}

// serve starts answering the data lane's requests and the internal lane's. A node calls it once its
// control plane has started: a proposal or a key request for a new process at an old one's address must
// not reach a node whose raft does not exist yet.
func (p *dataPort) serve(wg *sync.WaitGroup) {
	wg.Go(func() { p.data.Serve(p.lanes[0]) })
	wg.Go(func() { p.internal.Serve(p.lanes[1]) })
}

// close stops the servers and the listener, if open was reached.
func (p *dataPort) close() []error {
	if p.mux == nil {
		return nil
	}
	return []error{p.data.Close(), p.internal.Close(), p.mux.Close()}
}

// listenData binds the data port: on the configured in-memory network, if any, else on a TCP socket.
func listenData(cfg *Config) (net.Listener, error) {
	if cfg.hooks.network != nil {
		return cfg.hooks.network.Listen(cfg.DataAddr)
	}
	return net.Listen("tcp", cfg.DataAddr)
}

// defaultDialer is the dialer of a Config without one: the in-memory network's, if any, else a net.Dialer.
func defaultDialer(cfg *Config) transport.Dialer {
	if cfg.hooks.network != nil {
		return cfg.hooks.network
	}
	return &net.Dialer{}
}
