#!/bin/bash
# Publishes 100,000 messages from every node at once with redis-benchmark, one subscriber on each node,
# and reports the wall time, each benchmark's summary and what each subscriber received.
# Usage: scripts/pubsub-bench.sh LABEL PORT [PORT ...]   (the RESP ports of a running cluster)
set -eu
label=$1
shift
dir=$(mktemp -d)
for p in "$@"; do
	(timeout 120 redis-cli -p "$p" subscribe news >"$dir/sub-$p.txt" 2>&1 &)
done
sleep 0.5 # the subscriptions are made before the first publish
start=$(date +%s.%N)
for p in "$@"; do
	redis-benchmark -p "$p" -n 100000 -c 4 -P 16 PUBLISH news __rand_int__ >"$dir/bench-$p.txt" 2>&1 &
done
wait
end=$(date +%s.%N)
sleep 2 # the last messages reach the subscribers
echo "$label: $(echo "$end - $start" | bc) s for $((100000 * $#)) publishes"
for p in "$@"; do
	echo "  subscriber at $p received $(grep -c '^message$' "$dir/sub-$p.txt")"
	echo "  $(grep 'throughput summary' "$dir/bench-$p.txt"); avg min p50 p95 p99 max ms: $(grep -A2 'latency summary' "$dir/bench-$p.txt" | tail -1)"
done
pkill -f "redis-cli -p .* subscribe news" || true
rm -r "$dir"
