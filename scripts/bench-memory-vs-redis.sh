#!/usr/bin/env bash
# Memory per stored key: one Zaris node (cmd/zaris, RF 1) and one redis-server (no persistence) each take the
# same writes from redis-benchmark, 3M SETs of 64-byte values over 1M random keys by default, and the script
# prints each process's resident memory (RSS, from /proc) before and after, the keys each holds (DBSIZE), and
# the bytes of RSS growth per key, as a Markdown table. Both run side by side on loopback.
#
#   scripts/bench-memory-vs-redis.sh               the default: WRITES=3000000 SPACE=1000000 VALUE=64
#   ZARIS_DATA_DIR=1 scripts/bench-memory-vs-redis.sh   Zaris with a data dir (op log and snapshots on disk)
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server, redis-tools). Ports: Zaris 7201
# (gossip 17201, data 27201), Redis 7301.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WRITES=${WRITES:-3000000}
SPACE=${SPACE:-1000000}
VALUE=${VALUE:-64}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zaris-mem.XXXXXX")
ZPORT=7201
RPORT=7301
zpid=""

cleanup() {
  [[ -n $zpid ]] && kill "$zpid" 2>/dev/null && wait "$zpid" 2>/dev/null || true
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

wait_serving() {
  for _ in $(seq 300); do
    if [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && [[ $(redis-cli -p "$1" set zaris:probe 1 2>/dev/null) == OK ]]; then
      redis-cli -p "$1" del zaris:probe >/dev/null
      return 0
    fi
    sleep 0.2
  done
  echo "port $1 does not serve" >&2
  return 1
}

go build -o "$WORK/zaris" "$ROOT/cmd/zaris"
zargs=(--name mem-1 --resp-addr "127.0.0.1:$ZPORT" --gossip-addr 127.0.0.1:17201 --data-addr 127.0.0.1:27201
  --bootstrap-expect 1 --rf 1 --timing lan)
if [[ -n ${ZARIS_DATA_DIR:-} ]]; then zargs+=(--data-dir "$WORK/data"); fi
"$WORK/zaris" "${zargs[@]}" >"$WORK/zaris.log" 2>&1 &
zpid=$!
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --dir "$WORK" --logfile "$WORK/redis.log" --pidfile "$WORK/redis.pid"
wait_serving "$ZPORT"
wait_serving "$RPORT"
rpid=$(cat "$WORK/redis.pid")

declare -A before after keys
before[zaris]=$(rss_kib "$zpid")
before[redis]=$(rss_kib "$rpid")
for sys in zaris redis; do
  port=$ZPORT
  [[ $sys == redis ]] && port=$RPORT
  redis-benchmark -p "$port" -t set -n "$WRITES" -r "$SPACE" -d "$VALUE" -c 50 -P 16 -q >/dev/null
  keys[$sys]=$(redis-cli -p "$port" dbsize)
  after[$sys]=$(rss_kib "$( [[ $sys == zaris ]] && echo "$zpid" || echo "$rpid")")
done

echo "$WRITES SETs of $VALUE-byte values over $SPACE random keys (redis-benchmark -r), RF 1$([[ -n ${ZARIS_DATA_DIR:-} ]] && echo ', Zaris with a data dir')"
echo
echo "| system | keys | RSS before | RSS after | RSS growth per key |"
echo "| --- | --- | --- | --- | --- |"
for sys in zaris redis; do
  per=$(( (after[$sys] - before[$sys]) * 1024 / keys[$sys] ))
  printf '| %s | %s | %d MiB | %d MiB | %d B |\n' "$sys" "${keys[$sys]}" $((before[$sys] / 1024)) $((after[$sys] / 1024)) "$per"
done
zper=$(( (after[zaris] - before[zaris]) * 1024 / keys[zaris] ))
rper=$(( (after[redis] - before[redis]) * 1024 / keys[redis] ))
echo
awk -v z="$zper" -v r="$rper" 'BEGIN { printf "Zaris / Redis, RSS growth per key: %.2fx\n", z / r }'
