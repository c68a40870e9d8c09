#!/usr/bin/env bash
# Memory per stored key: Zaris (cmd/zaris) and Redis (no persistence) each take the same writes from
# redis-benchmark, 3M SETs of 64-byte values over 1M random keys by default, and the script prints each
# system's resident memory (RSS, from /proc, summed over its processes) before and after, the distinct keys
# it holds (DBSIZE, summed over the nodes that own them), the bytes of RSS growth per key and the CPU time
# its processes spent while the writes ran, as a Markdown table. Both run side by side on loopback.
#
#   scripts/bench-memory-vs-redis.sh               one Zaris node (RF 1) against one redis-server
#   COPIES=2 scripts/bench-memory-vs-redis.sh      two Zaris nodes (RF 2) against a Redis master and replica
#   ZARIS_DATA_DIR=1 scripts/bench-memory-vs-redis.sh   Zaris with a data dir (op log and snapshots on disk)
#
# WRITES, SPACE and VALUE change the load (defaults 3000000, 1000000, 64). Needs redis-server, redis-cli and
# redis-benchmark (Debian: redis-server, redis-tools). Ports: Zaris 7201.. (gossip 17201.., data 27201..),
# Redis 7301..
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WRITES=${WRITES:-3000000}
SPACE=${SPACE:-1000000}
VALUE=${VALUE:-64}
COPIES=${COPIES:-1}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zaris-mem.XXXXXX")
ZPORT=7201
RPORT=7301
zpids=()
rports=()

if [[ $COPIES != 1 && $COPIES != 2 ]]; then
  echo "COPIES must be 1 or 2" >&2
  exit 1
fi

cleanup() {
  for pid in "${zpids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  for port in "${rports[@]}"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# cpu_ms PID... sums the user and system CPU time of the processes, in milliseconds.
cpu_ms() {
  local ticks=0 hz
  hz=$(getconf CLK_TCK)
  for pid in "$@"; do ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done
  echo $((ticks * 1000 / hz))
}

# total_rss_kib PID... sums the RSS of the processes.
total_rss_kib() {
  local sum=0
  for pid in "$@"; do sum=$((sum + $(rss_kib "$pid"))); done
  echo "$sum"
}

# wait_serving PORT waits until the server on PORT answers and takes a write (through redirects).
wait_serving() {
  for _ in $(seq 300); do
    if [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && [[ $(redis-cli -c -p "$1" set zaris:probe 1 2>/dev/null) == OK ]]; then
      redis-cli -c -p "$1" del zaris:probe >/dev/null
      return 0
    fi
    sleep 0.2
  done
  echo "port $1 does not serve" >&2
  return 1
}

(cd "$ROOT" && go build -o "$WORK/zaris" ./cmd/zaris)
for i in $(seq 1 "$COPIES"); do
  zargs=(--name "mem-$i" --resp-addr "127.0.0.1:$((ZPORT + i - 1))" --gossip-addr "127.0.0.1:$((17201 + i - 1))"
    --data-addr "127.0.0.1:$((27201 + i - 1))" --bootstrap-expect "$COPIES" --rf "$COPIES" --timing lan)
  if ((i > 1)); then zargs+=(--join 127.0.0.1:17201); fi
  if [[ -n ${ZARIS_DATA_DIR:-} ]]; then zargs+=(--data-dir "$WORK/data-$i"); fi
  "$WORK/zaris" "${zargs[@]}" >"$WORK/zaris-$i.log" 2>&1 &
  zpids+=($!)
done
for i in $(seq 1 "$COPIES"); do
  port=$((RPORT + i - 1))
  replica=()
  if ((i > 1)); then replica=(--replicaof 127.0.0.1 "$RPORT"); fi
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes "${replica[@]}" \
    --dir "$WORK" --logfile "$WORK/redis-$i.log" --pidfile "$WORK/redis-$i.pid" --dbfilename "dump-$i.rdb"
  rports+=("$port")
done
wait_serving "$ZPORT"
wait_serving "$RPORT"
rpids=()
for i in $(seq 1 "$COPIES"); do rpids+=("$(cat "$WORK/redis-$i.pid")"); done

# zaris_keys sums DBSIZE, the keys of the partitions each node owns, over the Zaris nodes.
zaris_keys() {
  local sum=0
  for i in $(seq 1 "$COPIES"); do sum=$((sum + $(redis-cli -p "$((ZPORT + i - 1))" dbsize))); done
  echo "$sum"
}

# redis_synced waits until the Redis replica holds as many keys as its master.
redis_synced() {
  ((COPIES == 1)) && return 0
  for _ in $(seq 300); do
    [[ $(redis-cli -p "$((RPORT + 1))" dbsize) == $(redis-cli -p "$RPORT" dbsize) ]] && return 0
    sleep 0.2
  done
  echo "the Redis replica did not catch up" >&2
  return 1
}

declare -A before after keys cpu
before[zaris]=$(total_rss_kib "${zpids[@]}")
before[redis]=$(total_rss_kib "${rpids[@]}")
cpu[zaris]=$(cpu_ms "${zpids[@]}")
# In cluster mode redis-benchmark puts each node's hash tag in its keys, so each master gets its own key
# space of -r keys: SPACE/COPIES each keeps the distinct keys near those Redis holds.
cluster=() zspace=$SPACE
if ((COPIES > 1)); then cluster=(--cluster) zspace=$((SPACE / COPIES)); fi
redis-benchmark "${cluster[@]}" -p "$ZPORT" -t set -n "$WRITES" -r "$zspace" -d "$VALUE" -c 50 -P 16 -q >/dev/null
keys[zaris]=$(zaris_keys)
after[zaris]=$(total_rss_kib "${zpids[@]}")
cpu[zaris]=$(($(cpu_ms "${zpids[@]}") - cpu[zaris]))
cpu[redis]=$(cpu_ms "${rpids[@]}")
redis-benchmark -p "$RPORT" -t set -n "$WRITES" -r "$SPACE" -d "$VALUE" -c 50 -P 16 -q >/dev/null
redis_synced
keys[redis]=$(redis-cli -p "$RPORT" dbsize)
after[redis]=$(total_rss_kib "${rpids[@]}")
cpu[redis]=$(($(cpu_ms "${rpids[@]}") - cpu[redis]))

layout="one Zaris node (RF 1) against one redis-server"
((COPIES == 2)) && layout="two Zaris nodes (RF 2) against a Redis master and its replica, RSS summed over both processes"
echo "$WRITES SETs of $VALUE-byte values over $SPACE random keys (redis-benchmark -r): $layout$([[ -n ${ZARIS_DATA_DIR:-} ]] && echo ', Zaris with a data dir')"
echo
echo "| system | keys | RSS before | RSS after | RSS growth per key | CPU during the writes |"
echo "| --- | --- | --- | --- | --- | --- |"
for sys in zaris redis; do
  per=$(((after[$sys] - before[$sys]) * 1024 / keys[$sys]))
  printf '| %s | %s | %d MiB | %d MiB | %d B | %d ms |\n' "$sys" "${keys[$sys]}" $((before[$sys] / 1024)) $((after[$sys] / 1024)) "$per" "${cpu[$sys]}"
done
zper=$(((after[zaris] - before[zaris]) * 1024 / keys[zaris]))
rper=$(((after[redis] - before[redis]) * 1024 / keys[redis]))
echo
awk -v z="$zper" -v r="$rper" 'BEGIN { printf "Zaris / Redis, RSS growth per key: %.2fx\n", z / r }'
