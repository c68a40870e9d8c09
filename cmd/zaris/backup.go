package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/zaris-go/zaris"
)

// backupOptions are the flags of `zaris backup` and `zaris restore`.
type backupOptions struct {
	recoverOptions
	dir     string
	replace bool
	rate    string // bytes a second, in Redis's units; "" for unpaced
}

// parseBackup reads the flags of `zaris backup` (restore false) or `zaris restore`.
func parseBackup(args []string, restore bool) (backupOptions, error) {
	var o backupOptions
	name, dirFlag := "zaris backup", "to"
	if restore {
		name, dirFlag = "zaris restore", "from"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o.register(fs, 30*time.Minute)
	fs.StringVar(&o.dir, dirFlag, "", "the backup's directory on the node's machine, under the node's --backup-dir")
	if restore {
		fs.BoolVar(&o.replace, "replace", false, "restore into a cluster that holds keys, replacing them")
	} else {
		fs.StringVar(&o.rate, "rate", "", "copy at most this many bytes a second (like 20mb), so that writes going on keep most of the machine (default: unpaced)")
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.dir == "" {
		return o, fmt.Errorf("--%s: want the backup's directory", dirFlag)
	}
	if o.rate != "" {
		rate, err := zaris.ParseMemorySize(o.rate)
		if err != nil || rate <= 0 {
			return o, fmt.Errorf("--rate %q: want bytes a second, like 20mb", o.rate)
		}
		o.rate = strconv.FormatInt(rate, 10)
	}
	return o, o.check(fs)
}

// runBackup is `zaris backup` (restore false) and `zaris restore`: it has the node at --addr copy the
// cluster's data into a directory on its machine (BACKUP SAVE), or restore one from there (BACKUP LOAD),
// and prints what it did. It returns the exit status: 0 once done, 1 when refused or failed, 2 on bad flags.
func runBackup(args []string, restore bool, stdout, stderr io.Writer) int {
	name := map[bool]string{false: "zaris backup", true: "zaris restore"}[restore]
	o, err := parseBackup(args, restore)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, name+":", err)
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := []string{"BACKUP", "SAVE", o.dir}
	if o.rate != "" {
		cmd = append(cmd, "RATE", o.rate)
	}
	if restore {
		cmd = []string{"BACKUP", "LOAD", o.dir}
		if o.replace {
			cmd = append(cmd, "REPLACE")
		}
	}
	report, err := adminCall(ctx, o.recoverOptions, cmd...)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	fmt.Fprintln(stdout, report)
	return 0
}
