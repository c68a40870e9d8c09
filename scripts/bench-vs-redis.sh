#!/usr/bin/env bash
# Benchmarks a 3-process Zaris cluster against a 3-master Redis Cluster side by side on this machine, with
# redis-benchmark --cluster (SET and GET, 50 clients, 64-byte values), unpipelined and with -P 16, and prints
# a Markdown table of the medians with the Zaris/Redis ratios. It also reports the servers' CPU time per
# request (user + system, summed over the three processes), which stays meaningful when redis-benchmark
# itself is the bottleneck.
#
#   scripts/bench-vs-redis.sh            ROUNDS=3 REQUESTS=200000 by default
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server, redis-tools). Both clusters run
# at the same time and the runs alternate between them, so drift in the machine's load hits both alike.
# Zaris uses ports 7001.. (see local-cluster.sh), Redis 7101..7103 with cluster bus ports 17101..17103.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zaris-bench.XXXXXX")
REDIS_PORTS=(7101 7102 7103)
export ZARIS_CLUSTER_DIR=$WORK/zaris
# LAN timings: the fast failure detection of "local" costs background CPU that a benchmark should not pay.
export ZARIS_TIMING=${ZARIS_TIMING:-lan}

cleanup() {
  "$ROOT/scripts/local-cluster.sh" stop >/dev/null 2>&1 || true
  for port in "${REDIS_PORTS[@]}"; do
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

start_redis_cluster() {
  local nodes=()
  for port in "${REDIS_PORTS[@]}"; do
    mkdir -p "$WORK/redis-$port"
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file nodes.conf \
      --dir "$WORK/redis-$port" --save '' --appendonly no --daemonize yes \
      --logfile "$WORK/redis-$port/redis.log" --pidfile "$WORK/redis-$port/redis.pid"
    nodes+=("127.0.0.1:$port")
  done
  for port in "${REDIS_PORTS[@]}"; do
    until redis-cli -p "$port" ping >/dev/null 2>&1 && [[ -s $WORK/redis-$port/redis.pid ]]; do sleep 0.1; done
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$WORK/redis-create.log"
  for port in "${REDIS_PORTS[@]}"; do
    until redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok'; do sleep 0.2; done
  done
  echo "Redis Cluster of 3 masters serving on 127.0.0.1:${REDIS_PORTS[0]}..${REDIS_PORTS[2]}"
}

# cpu_ticks PID... sums the user and system CPU ticks the processes have used.
cpu_ticks() {
  local total=0 fields pid
  for pid in "$@"; do
    read -r -a fields <"/proc/$pid/stat"
    total=$((total + fields[13] + fields[14]))
  done
  echo "$total"
}

# bench PORT PIPELINE PID... prints "SET_RPS GET_RPS CPU_US_PER_REQUEST" for one redis-benchmark run.
bench() {
  local port=$1 pipeline=$2 out before after
  shift 2
  before=$(cpu_ticks "$@")
  out=$(redis-benchmark --cluster -p "$port" -t set,get -c 50 -d 64 -n "$REQUESTS" -P "$pipeline" --csv 2>&1)
  after=$(cpu_ticks "$@")
  if grep -qi 'error' <<<"$out"; then
    echo "redis-benchmark reported errors against port $port:" >&2
    echo "$out" >&2
    exit 1
  fi
  local set get
  set=$(awk -F'"' '$2 == "SET" { print $4 }' <<<"$out")
  get=$(awk -F'"' '$2 == "GET" { print $4 }' <<<"$out")
  echo "$set $get $(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$REQUESTS" \
    'BEGIN { printf "%.1f", t * 1e6 / hz / (2 * n) }')"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

"$ROOT/scripts/local-cluster.sh" start 3
start_redis_cluster
declare -A port_of=([zaris]=7001 [redis]=${REDIS_PORTS[0]})
declare -A pids_of=([zaris]="$(cat "$ZARIS_CLUSTER_DIR"/*.pid)" [redis]="$(cat "$WORK"/redis-*/redis.pid)")

declare -A results
for round in $(seq 1 "$ROUNDS"); do
  for pipeline in 1 16; do
    for system in zaris redis; do
      # shellcheck disable=SC2086 # the pid list splits into arguments
      read -r set get cpu < <(bench "${port_of[$system]}" "$pipeline" ${pids_of[$system]})
      echo "round $round, -P $pipeline, $system: SET $set/s, GET $get/s, server CPU $cpu µs/request"
      results[$system-$pipeline-set]+="$set "
      results[$system-$pipeline-get]+="$get "
      results[$system-$pipeline-cpu]+="$cpu "
    done
  done
done

echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2), $(go version | awk '{print $3}')"
echo "command: redis-benchmark --cluster -p PORT -t set,get -c 50 -d 64 -n $REQUESTS [-P 16], median of $ROUNDS rounds"
echo
echo "| pipeline | test | Redis Cluster (req/s) | Zaris (req/s) | Zaris / Redis |"
echo "| --- | --- | ---: | ---: | ---: |"
ratio() { awk -v z="$1" -v r="$2" 'BEGIN { printf "%.2fx", z / r }'; }
for pipeline in 1 16; do
  label="none"
  ((pipeline > 1)) && label="-P $pipeline"
  for test in set get; do
    r=$(median ${results[redis-$pipeline-$test]})
    z=$(median ${results[zaris-$pipeline-$test]})
    echo "| $label | ${test^^} | $r | $z | $(ratio "$z" "$r") |"
  done
  r=$(median ${results[redis-$pipeline-cpu]})
  z=$(median ${results[zaris-$pipeline-cpu]})
  echo "| $label | server CPU µs per request | $r | $z | $(ratio "$z" "$r") |"
done
