#!/usr/bin/env bash
# Benchmarks a 3-process Zaris cluster against a 3-master Redis Cluster side by side on this machine, with
# redis-benchmark --cluster (50 clients, 64-byte values), unpipelined and with -P 16, and prints a Markdown
# table of the medians with the Zaris/Redis ratios. It also reports the servers' CPU time per request (user +
# system, summed over the three processes), which stays meaningful when redis-benchmark itself is the
# bottleneck.
#
#   scripts/bench-vs-redis.sh                     SET and GET, ROUNDS=3 REQUESTS=200000 by default
#   TESTS=collections scripts/bench-vs-redis.sh   HSET, HGET, ZADD and ZRANGE
#
# TESTS=strings (the default) runs redis-benchmark's built-in set and get tests together, so its CPU row
# covers both. TESTS=collections runs each command on its own, with a CPU row each: the built-in hset and zadd
# tests, then HGET of the field hset writes and ZRANGE of the first 10 members of a sorted set, given as
# commands whose key holds redis-benchmark's {tag}, so that --cluster sends each to the key's owner. Without
# -r, redis-benchmark gives all clients of a node the same key per command (tagged with the node's first
# slot), so before the first round the same commands store what the reads expect: the 64-byte field and a
# sorted set of 100 members. The script checks that both systems then hold exactly these keys, before and
# after the runs, and that Redis counted no keyspace miss.
#
# redis-benchmark --cluster (7.0) neither prints error replies nor fails on them, so every command first runs
# once on both systems through redis-cli, on keys of its own, and the replies must be the same.
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server, redis-tools). Both clusters run
# at the same time and the runs alternate between them, so drift in the machine's load hits both alike.
# Zaris uses ports 7001.. (see local-cluster.sh), Redis 7101..7103 with cluster bus ports 17101..17103.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
TESTS=${TESTS:-strings}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zaris-bench.XXXXXX")
REDIS_PORTS=(7101 7102 7103)
ZARIS_PORTS=(7001 7002 7003)
export ZARIS_CLUSTER_DIR=$WORK/zaris
# LAN timings: the fast failure detection of "local" costs background CPU that a benchmark should not pay.
export ZARIS_TIMING=${ZARIS_TIMING:-lan}

VALUE=$(printf 'x%.0s' $(seq 64)) # as long as the -d 64 of the built-in tests
# RUNS are redis-benchmark runs, each "TEST...|ARGS": the tests it reports, in its order, and its arguments.
# POPULATE are the writes stored before the first round, CHECKS every command the runs send (the built-in
# tests as redis-benchmark sends them without -r).
case $TESTS in
strings)
  RUNS=("SET GET|-t set,get")
  POPULATE=()
  CHECKS=("SET key:{tag}:__rand_int__ $VALUE" "GET key:{tag}:__rand_int__")
  ;;
collections)
  RUNS=("HSET|-t hset" "HGET|HGET myhash:{tag} element:__rand_int__" "ZADD|-t zadd" "ZRANGE|ZRANGE myzset:{tag} 0 9")
  POPULATE=("HSET myhash:{tag} element:__rand_int__ $VALUE"
    "ZADD myzset:{tag} $(for i in $(seq 100); do printf '%d member:%03d ' "$i" "$i"; done)")
  CHECKS=("${POPULATE[@]}" "HSET myhash:{tag} element:__rand_int__ $VALUE" "HGET myhash:{tag} element:__rand_int__"
    "ZADD myzset:{tag} 0 element:__rand_int__" "ZRANGE myzset:{tag} 0 9")
  ;;
*)
  echo "TESTS must be strings or collections, not $TESTS" >&2
  exit 2
  ;;
esac

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

# bench SYSTEM PIPELINE TESTS ARGS... runs redis-benchmark once with ARGS, which run TESTS tests, and prints
# the requests per second of each, then the servers' CPU µs per request over all of them.
bench() {
  local system=$1 pipeline=$2 tests=$3 out before after rps
  shift 3
  # shellcheck disable=SC2086 # the pid list splits into arguments
  before=$(cpu_ticks ${pids_of[$system]})
  out=$(redis-benchmark --cluster -p "${port_of[$system]}" -c 50 -d 64 -n "$REQUESTS" -P "$pipeline" --csv "$@" 2>&1)
  # shellcheck disable=SC2086
  after=$(cpu_ticks ${pids_of[$system]})
  rps=$(awk -F'"' '/^"/ && $2 != "test" { printf "%s ", $4 }' <<<"$out")
  if grep -qi 'error' <<<"$out" || (($(wc -w <<<"$rps") != tests)); then
    echo "redis-benchmark $* failed against port ${port_of[$system]}:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "$rps$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n=$((tests * REQUESTS)) \
    'BEGIN { printf "%.1f", t * 1e6 / hz / n }')"
}

# check_replies runs every command of CHECKS once on both systems, with {check} for the hash tag, stops if
# their replies differ, then deletes the keys it wrote.
check_replies() {
  local cmd args redis zaris port
  local -A keys=()
  for cmd in "${CHECKS[@]}"; do
    read -r -a args <<<"${cmd//\{tag\}/\{check\}}"
    redis=$(redis-cli -c -p "${port_of[redis]}" "${args[@]}" 2>&1)
    zaris=$(redis-cli -c -p "${port_of[zaris]}" "${args[@]}" 2>&1)
    if [[ $zaris != "$redis" ]]; then
      printf 'Zaris and Redis reply differently to %s\n--- Redis:\n%s\n--- Zaris:\n%s\n' "${args[*]}" "$redis" "$zaris" >&2
      exit 1
    fi
    keys[${args[1]}]=1
  done
  for port in "${port_of[@]}"; do
    redis-cli -c -p "$port" del "${!keys[@]}" >/dev/null
  done
  echo "${#CHECKS[@]} commands reply alike on both systems"
}

# populate SYSTEM stores POPULATE through redis-benchmark, so under the keys its runs will use.
populate() {
  local cmd args out
  for cmd in "${POPULATE[@]}"; do
    read -r -a args <<<"$cmd"
    out=$(redis-benchmark --cluster -p "${port_of[$1]}" -c 50 -n 1000 --csv "${args[@]}" 2>&1)
    if ! grep -q '^"' <<<"$out"; then
      echo "populating $1 with ${args[0]} failed:" >&2
      echo "$out" >&2
      exit 1
    fi
  done
}

# info_sum SYSTEM SECTION FIELD sums a numeric INFO field over the system's nodes.
info_sum() {
  local port total=0 n
  for port in ${ports_of[$1]}; do
    n=$(redis-cli -p "$port" info "$2" | tr -d '\r' | sed -n "s/^$3[=:]\([0-9]*\).*/\1/p")
    total=$((total + ${n:-0}))
  done
  echo "$total"
}

# expect_populated_keys WHEN stops unless each system holds one key per POPULATE command and node.
expect_populated_keys() {
  local want=$((${#POPULATE[@]} * 3)) system got
  for system in zaris redis; do
    got=$(info_sum "$system" keyspace db0:keys)
    if ((got != want)); then
      echo "$system holds $got keys $1, not the $want populated: the runs would not read what was stored" >&2
      exit 1
    fi
  done
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

load_average() { cut -d' ' -f1-3 /proc/loadavg; }

load_before=$(load_average)
"$ROOT/scripts/local-cluster.sh" start 3
start_redis_cluster
declare -A port_of=([zaris]=${ZARIS_PORTS[0]} [redis]=${REDIS_PORTS[0]})
declare -A ports_of=([zaris]="${ZARIS_PORTS[*]}" [redis]="${REDIS_PORTS[*]}")
declare -A pids_of=([zaris]="$(cat "$ZARIS_CLUSTER_DIR"/*.pid)" [redis]="$(cat "$WORK"/redis-*/redis.pid)")

check_replies
if ((${#POPULATE[@]} > 0)); then
  populate zaris
  populate redis
  expect_populated_keys "after populating"
fi
misses_before=$(info_sum redis stats keyspace_misses)

declare -A results
for round in $(seq 1 "$ROUNDS"); do
  for pipeline in 1 16; do
    for system in zaris redis; do
      for i in "${!RUNS[@]}"; do
        read -r -a tests <<<"${RUNS[i]%%|*}"
        read -r -a args <<<"${RUNS[i]#*|}"
        out=$(bench "$system" "$pipeline" "${#tests[@]}" "${args[@]}")
        read -r -a values <<<"$out"
        line="round $round, -P $pipeline, $system:"
        for j in "${!tests[@]}"; do
          line+=" ${tests[j]} ${values[j]}/s,"
          results[$system-$pipeline-${tests[j]}]+="${values[j]} "
        done
        echo "$line server CPU ${values[-1]} µs/request"
        results[$system-$pipeline-cpu-$i]+="${values[-1]} "
      done
    done
  done
done

misses=$(($(info_sum redis stats keyspace_misses) - misses_before))
if ((misses > 0)); then
  echo "Redis counted $misses keyspace misses during the runs: some reads found no key" >&2
  exit 1
fi
if ((${#POPULATE[@]} > 0)); then expect_populated_keys "after the runs"; fi

echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2), $(go version | awk '{print $3}')"
echo "load average: $load_before before, $(load_average) after"
for run in "${RUNS[@]}"; do
  echo "command: redis-benchmark --cluster -p PORT -c 50 -d 64 -n $REQUESTS [-P 16] ${run#*|}, median of $ROUNDS rounds"
done
echo
echo "| pipeline | test | Redis Cluster (req/s) | Zaris (req/s) | Zaris / Redis |"
echo "| --- | --- | ---: | ---: | ---: |"
ratio() { awk -v z="$1" -v r="$2" 'BEGIN { printf "%.2fx", z / r }'; }
for pipeline in 1 16; do
  label="none"
  ((pipeline > 1)) && label="-P $pipeline"
  for i in "${!RUNS[@]}"; do
    read -r -a tests <<<"${RUNS[i]%%|*}"
    for test in "${tests[@]}"; do
      r=$(median ${results[redis-$pipeline-$test]})
      z=$(median ${results[zaris-$pipeline-$test]})
      echo "| $label | $test | $r | $z | $(ratio "$z" "$r") |"
    done
    cpu_label="server CPU µs per request"
    ((${#tests[@]} == 1)) && cpu_label="server CPU µs per ${tests[0]}"
    r=$(median ${results[redis-$pipeline-cpu-$i]})
    z=$(median ${results[zaris-$pipeline-cpu-$i]})
    echo "| $label | $cpu_label | $r | $z | $(ratio "$z" "$r") |"
  done
done
