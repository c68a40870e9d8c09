package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// bankClientCommand, as the first argument, makes this command a bank client: a lite member that runs one
// client of the bank workload, coordinating its own transactions, and writes each step to stdout as a
// JSON line for the harness that started it.
const bankClientCommand = "bank-client"

// The pace of the bank clients' deaths: one killed every killEvery±50%, restarted 0.2 to 1 s later.
const (
	bankKillEvery = 2 * time.Second
	bankStopGrace = 10 * time.Second // a SIGTERMed client's last call and leave, before it is killed
)

// bankProcs runs the bank workload's clients as processes of their own and kills them on a seeded
// schedule: a coordinator then dies amid its two-phase commits, and the servers must resolve the intents
// it left, from its transaction record or by aborting, before anyone may read or write those keys again.
type bankProcs struct {
	self   string                              // this command's executable
	args   func(name string) ([]string, error) // the flags that put a client process in the cluster
	logDir string                              // each process logs to <logDir>/<name>.log; "" to stderr
	bank   *chaos.Bank
	start  time.Time
	out    io.Writer // where the kills are announced

	mu      sync.Mutex
	procs   []*bankProc
	kills   int
	readers sync.WaitGroup // one per process, recording its events
}

// bankProc is the current process of one bank client.
type bankProc struct {
	id, incarnation int
	cmd             *exec.Cmd
	done            chan struct{} // closed once the process has exited
}

// run starts every client, kills and restarts them until ctx ends, then stops them and waits until every
// event they wrote is recorded.
func (b *bankProcs) run(ctx context.Context, seed uint64) error {
	for id := range b.bank.Clients {
		if err := b.launch(id, 0); err != nil {
			b.stopAll()
			return err
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0xba4c))
	for chaos.Sleep(ctx, bankKillEvery/2+time.Duration(rng.Int64N(int64(bankKillEvery)))) {
		id := rng.IntN(b.bank.Clients)
		b.kill(id)
		if !chaos.Sleep(ctx, 200*time.Millisecond+time.Duration(rng.Int64N(int64(800*time.Millisecond)))) {
			break
		}
		if err := b.launch(id, b.current(id).incarnation+1); err != nil {
			fmt.Fprintf(b.out, "%7.1fs restart bank client %d: %v\n", time.Since(b.start).Seconds(), id, err)
		}
	}
	b.stopAll()
	return nil
}

func (b *bankProcs) current(id int) *bankProc {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.procs[id]
}

// launch starts incarnation inc of client id and records the events it writes.
func (b *bankProcs) launch(id, inc int) error {
	name := fmt.Sprintf("chaos-bank-%d", id)
	args, err := b.args(name)
	if err != nil {
		return err
	}
	args = append([]string{bankClientCommand, "-client", strconv.Itoa(id), "-incarnation", strconv.Itoa(inc)}, args...)
	cmd := exec.Command(b.self, args...)
	cmd.Stderr = os.Stderr
	if b.logDir != "" {
		f, err := os.OpenFile(filepath.Join(b.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close() // the child holds its own descriptor
		cmd.Stderr = f
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &bankProc{id: id, incarnation: inc, cmd: cmd, done: make(chan struct{})}
	b.mu.Lock()
	if id < len(b.procs) {
		b.procs[id] = p
	} else {
		b.procs = append(b.procs, p)
	}
	b.mu.Unlock()
	b.readers.Go(func() {
		b.record(stdout)
		cmd.Wait()
		close(p.done)
	})
	return nil
}

// record turns each line a client writes into an event of the bank. A line cut short by the client's
// death is no event: the client had not yet begun what it would have announced.
func (b *bankProcs) record(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var ev chaos.BankEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			b.bank.Record(ev)
		}
	}
	io.Copy(io.Discard, r)
}

// kill SIGKILLs client id's current process and waits until it is gone.
func (b *bankProcs) kill(id int) {
	p := b.current(id)
	if p.cmd.Process.Kill() == nil {
		b.mu.Lock()
		b.kills++
		b.mu.Unlock()
		fmt.Fprintf(b.out, "%7.1fs kill bank client %d (a transaction coordinator)\n", time.Since(b.start).Seconds(), id)
	}
	<-p.done
}

// stopAll asks every client to stop (SIGTERM: its call in flight ends, it leaves), kills those that do not
// within bankStopGrace, and waits until every event is recorded.
func (b *bankProcs) stopAll() {
	b.mu.Lock()
	procs := append([]*bankProc(nil), b.procs...)
	b.mu.Unlock()
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(bankStopGrace):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	b.readers.Wait()
}

// note says what the clients went through, for the report.
func (b *bankProcs) note() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("bank: %d clients in processes of their own, each a lite member coordinating its transactions; "+
		"%d of them SIGKILLed amid their transactions and restarted", len(b.procs), b.kills)
}

// bankClientArgs are the flags of a client process named name: the cluster to join and its parameters,
// and under -secure its certificate and the gossip key.
func (h *harness) bankClientArgs(name string) ([]string, error) {
	args := []string{"-seed", strconv.FormatUint(h.o.seed, 10), "-nodes", strconv.Itoa(h.o.nodes),
		"-rf", strconv.Itoa(h.o.rf), "-failover-timeout", h.o.failoverTimeout.String(),
		"-join", strings.Join(h.c.joinAddrs(nil), ",")}
	if h.c.pki != nil {
		secure, err := h.c.pki.serverArgs(name)
		if err != nil {
			return nil, err
		}
		args = append(args, secure...)
	}
	return args, nil
}

// runBankClient is the bank-client command: it joins as a lite member and runs one client of the bank
// until SIGTERM, writing each event as a JSON line to stdout.
func runBankClient(args []string) int {
	fs := flag.NewFlagSet("zaris-chaos "+bankClientCommand, flag.ContinueOnError)
	id := fs.Int("client", 0, "the client's number")
	inc := fs.Int("incarnation", 0, "how many processes ran this client before")
	seed := fs.Uint64("seed", 0, "the run's seed")
	nodes := fs.Int("nodes", 5, "the cluster's servers, as it was bootstrapped")
	rf := fs.Int("rf", 2, "the cluster's replication factor")
	failover := fs.Duration("failover-timeout", time.Second, "the servers' failover timeout")
	join := fs.String("join", "", "gossip addresses of servers, comma-separated")
	cert := fs.String("tls-cert", "", "certificate file (-secure)")
	key := fs.String("tls-key", "", "key file (-secure)")
	ca := fs.String("tls-ca", "", "CA certificate file (-secure)")
	gossipKey := fs.String("gossip-key", "", "gossip key, base64 (-secure)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// A restarted client is a new process of the same member.
	cfg := liteConfig(fmt.Sprintf("chaos-bank-%d", *id), *rf, *nodes, *failover, strings.Split(*join, ","))
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *cert != "" {
		tlsCfg, err := zaris.TLSFromFiles(*cert, *key, *ca)
		if err != nil {
			fmt.Fprintln(os.Stderr, "zaris-chaos bank-client:", err)
			return 2
		}
		if cfg.GossipKey, err = base64.StdEncoding.DecodeString(*gossipKey); err != nil {
			fmt.Fprintln(os.Stderr, "zaris-chaos bank-client: -gossip-key:", err)
			return 2
		}
		cfg.TLS = tlsCfg
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	node, err := joinClient(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zaris-chaos bank-client:", err)
		return 1
	}
	defer node.Close()
	target := txnBankOn(node)
	bank := newBank(*seed, func(int) chaos.BankTarget { return target })
	enc := json.NewEncoder(os.Stdout) // one write per event: a pipe takes it whole or not at all
	bank.RunClient(ctx, *id, *inc, func(ev chaos.BankEvent) { enc.Encode(ev) })
	leaveCtx, cancel := context.WithTimeout(context.Background(), liteLeave)
	defer cancel()
	node.Leave(leaveCtx)
	return 0
}

// liteConfig is the config of a lite member of the run's cluster, with the servers' parameters and timings.
func liteConfig(name string, rf, nodes int, failover time.Duration, join []string) zaris.Config {
	cfg := zaris.DefaultConfig()
	cfg.Name, cfg.Lite, cfg.Timing = name, true, zaris.LocalTiming()
	cfg.ReplicationFactor, cfg.BootstrapExpect, cfg.FailoverTimeout = rf, nodes, failover
	cfg.MaxRetries, cfg.Join = maxRetries, join
	return cfg
}

// joinClient joins cfg's lite member and waits for its first map.
func joinClient(ctx context.Context, cfg zaris.Config) (*zaris.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	node, err := zaris.Join(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("join as a lite member: %w", err)
	}
	if err := node.Ready(ctx); err != nil {
		node.Close()
		return nil, fmt.Errorf("lite member got no partition map: %w", err)
	}
	return node, nil
}

// newBank is the run's bank workload, its clients' calls going to target.
func newBank(seed uint64, target func(client int) chaos.BankTarget) *chaos.Bank {
	return &chaos.Bank{Accounts: bankAccounts, Initial: 1000, Clients: bankClients, Seed: seed, CallTimeout: callTimeout,
		Target: target,
		Failed: func(err error) bool { return errors.Is(err, zaris.ErrConflict) || errors.Is(err, zaris.ErrLocked) },
	}
}

// txnBankOn runs the bank's transactions on node, a lite member: it coordinates each one.
func txnBankOn(node *zaris.Node) chaos.BankTarget {
	return chaos.TxnBank(chaos.TxnStore{
		Txn: func(ctx context.Context, fn func(chaos.TxnOps) error) error {
			return node.Txn(ctx, func(tx *zaris.Tx) error {
				return fn(chaos.TxnOps{
					Get: func(key string) ([]byte, error) { return tx.Get(ctx, key) },
					Put: func(key string, value []byte) error { return tx.Put(key, value) },
				})
			})
		},
		Get: func(ctx context.Context, key string) ([]byte, bool, error) {
			ctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			v, err := node.Get(ctx, key)
			if errors.Is(err, zaris.ErrNotFound) {
				return nil, false, nil
			}
			return v, err == nil, err
		},
	}, bankAccounts)
}
