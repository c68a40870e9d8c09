#!/usr/bin/env bash
# Benchmarks a 3-process Zaris cluster against a 3-master Redis Cluster side by side on this machine, with
# redis-benchmark --cluster (SET and GET, 50 clients, 64-byte values), unpipelined and with -P 16, and prints
# a Markdown table of the medians with the Zaris/Redis ratios.
#
# Zaris runs twice: with Go's default GOMAXPROCS (every core), and with GOMAXPROCS=1, one scheduler thread
# per process like Redis's one main thread, which suits three servers and the benchmark sharing few cores.
#
#   scripts/bench-vs-redis.sh            ROUNDS=3 REQUESTS=200000 by default
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server, redis-tools). Both clusters run
# at the same time and the runs alternate between them, so drift in the machine's load hits both alike.
# Zaris uses ports 7001.. and 7201.. (see local-cluster.sh), Redis 7101..7103 with cluster bus ports
# 17101..17103.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zaris-bench.XXXXXX")
REDIS_PORTS=(7101 7102 7103)

# zaris_cluster start|stop DIR BASE [GOMAXPROCS] runs local-cluster.sh for one of the two Zaris clusters.
zaris_cluster() {
  local action=$1 dir=$2 base=$3 procs=${4:-}
  local args=("$action")
  [[ $action == start ]] && args+=(3)
  env ${procs:+GOMAXPROCS=$procs} ZARIS_CLUSTER_DIR="$WORK/$dir" ZARIS_BASE_PORT="$base" \
    "$ROOT/scripts/local-cluster.sh" "${args[@]}"
}

cleanup() {
  zaris_cluster stop zaris 7001 >/dev/null 2>&1 || true
  zaris_cluster stop zaris-gmp1 7201 >/dev/null 2>&1 || true
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
    until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$WORK/redis-create.log"
  for port in "${REDIS_PORTS[@]}"; do
    until redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok'; do sleep 0.2; done
  done
  echo "Redis Cluster of 3 masters serving on 127.0.0.1:${REDIS_PORTS[0]}..${REDIS_PORTS[2]}"
}

# bench PORT PIPELINE prints "SET_RPS GET_RPS" for one redis-benchmark run against the cluster at PORT.
bench() {
  local port=$1 pipeline=$2 out
  out=$(redis-benchmark --cluster -p "$port" -t set,get -c 50 -d 64 -n "$REQUESTS" -P "$pipeline" --csv 2>&1)
  if grep -qi 'error' <<<"$out"; then
    echo "redis-benchmark reported errors against port $port:" >&2
    echo "$out" >&2
    exit 1
  fi
  local set get
  set=$(awk -F'"' '$2 == "SET" { print $4 }' <<<"$out")
  get=$(awk -F'"' '$2 == "GET" { print $4 }' <<<"$out")
  echo "$set $get"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

zaris_cluster start zaris 7001
zaris_cluster start zaris-gmp1 7201 1
start_redis_cluster

declare -A port_of=([zaris]=7001 [zaris-gmp1]=7201 [redis]=${REDIS_PORTS[0]})
declare -A results
for round in $(seq 1 "$ROUNDS"); do
  for pipeline in 1 16; do
    for system in zaris zaris-gmp1 redis; do
      read -r set get < <(bench "${port_of[$system]}" "$pipeline")
      echo "round $round, -P $pipeline, $system: SET $set/s, GET $get/s"
      results[$system-$pipeline-set]+="$set "
      results[$system-$pipeline-get]+="$get "
    done
  done
done

echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(redis-server --version | awk '{print $3}')"
echo "command: redis-benchmark --cluster -p PORT -t set,get -c 50 -d 64 -n $REQUESTS [-P 16], median of $ROUNDS rounds"
echo
echo "| pipeline | test | Redis Cluster (req/s) | Zaris (req/s) | ratio | Zaris, GOMAXPROCS=1 (req/s) | ratio |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
ratio() { awk -v z="$1" -v r="$2" 'BEGIN { printf "%.2fx", z / r }'; }
for pipeline in 1 16; do
  for test in set get; do
    r=$(median ${results[redis-$pipeline-$test]})
    z=$(median ${results[zaris-$pipeline-$test]})
    z1=$(median ${results[zaris-gmp1-$pipeline-$test]})
    label="none"
    ((pipeline > 1)) && label="-P $pipeline"
    echo "| $label | ${test^^} | $r | $z | $(ratio "$z" "$r") | $z1 | $(ratio "$z1" "$r") |"
  done
done
