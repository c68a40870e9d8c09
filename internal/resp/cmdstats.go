package resp

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Statistics per command, as Redis's INFO commandstats reports them: how many times each ran, the time it
// took, and how many were rejected before they ran or failed with an error reply.

// commandCounts are one command's statistics.
type commandCounts struct {
	calls, usec, rejected, failed uint64
}

// maxCommandStats bounds the commands counted apart. Their names come from the command table and its
// subcommands, so the bound is only a guard.
const maxCommandStats = 1024

// statName is the name INFO commandstats gives cmd run with args: parent|sub for a subcommand, as Redis 7.
func statName(cmd *respCommand, args [][]byte) string {
	if cmd.parent && len(args) > 1 {
		if _, known := cmd.subArity[strings.ToLower(string(args[1]))]; known {
			return cmd.fullName(args) // one of a bounded set
		}
	}
	return cmd.name
}

// countCommand counts one run of the command named name, which took d, and failed with an error reply.
func (t *respTally) countCommand(name string, d time.Duration, failed bool) {
	t.updateCommand(name, func(cc *commandCounts) {
		cc.calls++
		cc.usec += uint64(d / time.Microsecond)
		if failed {
			cc.failed++
		}
	})
}

// countRejected counts a command refused before it ran.
func (t *respTally) countRejected(name string) {
	t.updateCommand(name, func(cc *commandCounts) { cc.rejected++ })
}

func (t *respTally) updateCommand(name string, update func(*commandCounts)) {
	cc, known := t.perCommand[name]
	if !known && len(t.perCommand) >= maxCommandStats {
		return
	}
	if t.perCommand == nil {
		t.perCommand = map[string]commandCounts{}
	}
	update(&cc)
	t.perCommand[name] = cc
}

// addCommands adds o's statistics per command to t's.
func (t *respTally) addCommands(o *respTally) {
	for name, oc := range o.perCommand {
		t.updateCommand(name, func(cc *commandCounts) {
			cc.calls += oc.calls
			cc.usec += oc.usec
			cc.rejected += oc.rejected
			cc.failed += oc.failed
		})
	}
}

// redirectCodes are the error replies of a command refused by the cluster before it ran: Redis counts
// them as rejected, not failed.
var redirectCodes = map[string]bool{"MOVED": true, "ASK": true, "TRYAGAIN": true, "CLUSTERDOWN": true, "CROSSSLOT": true, "OOM": true}

// commandstats writes INFO commandstats: one line per command that ran or was rejected, sorted by name.
func (r *infoRun) commandstats(w *infoText) {
	t := r.tally()
	for _, name := range slices.Sorted(maps.Keys(t.perCommand)) {
		cc := t.perCommand[name]
		perCall := 0.0
		if cc.calls > 0 {
			perCall = float64(cc.usec) / float64(cc.calls)
		}
		w.field("cmdstat_"+name, "calls="+strconv.FormatUint(cc.calls, 10)+",usec="+strconv.FormatUint(cc.usec, 10)+
			",usec_per_call="+strconv.FormatFloat(perCall, 'f', 2, 64)+",rejected_calls="+strconv.FormatUint(cc.rejected, 10)+
			",failed_calls="+strconv.FormatUint(cc.failed, 10))
	}
}
