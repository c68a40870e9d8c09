package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/zaris-go/zaris"
)

// denyFilePoll is how often --tls-deny-file is read again.
const denyFilePoll = 2 * time.Second

// maxDenyFile bounds --tls-deny-file: node names, not data.
const maxDenyFile = 1 << 20

// readDenyFile returns the node names in path: one a line, blank lines and lines starting with # skipped.
func readDenyFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tls-deny-file: %w", err)
	}
	if len(b) > maxDenyFile {
		return nil, fmt.Errorf("--tls-deny-file %s: %d bytes, more than %d", path, len(b), maxDenyFile)
	}
	var names []string
	lines := bufio.NewScanner(bytes.NewReader(b))
	for lines.Scan() {
		if line := strings.TrimSpace(lines.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names, lines.Err()
}

// followDenyFile reads path into deny every denyFilePoll until ctx ends, and closes the returned channel
// then. A file that cannot be read keeps the last list, and is logged once until it reads again.
func followDenyFile(ctx context.Context, path string, deny *zaris.DenyList, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(denyFilePoll)
		defer tick.Stop()
		var last string
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			names, err := readDenyFile(path)
			if err != nil {
				if !failing {
					log.Warn("deny list kept as it was", "err", err)
				}
				failing = true
				continue
			}
			failing = false
			if joined := strings.Join(names, "\n"); joined != last {
				deny.Set(names...)
				last = joined
				log.Info("deny list read", "file", path, "nodes", len(names))
			}
		}
	}()
	return done
}
