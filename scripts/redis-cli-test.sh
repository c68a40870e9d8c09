#!/usr/bin/env bash
# Drives a 3-process Zaris cluster (scripts/local-cluster.sh) with Debian's unmodified Redis tools:
# redis-cli -c for single commands, cluster introspection and redirects, then redis-benchmark --cluster. Any
# wrong answer or error fails the script. Needs redis-cli and redis-benchmark (Debian: redis-tools).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zaris-redis-cli.XXXXXX")
export ZARIS_CLUSTER_DIR=$WORK/cluster
export ZARIS_BASE_PORT=${ZARIS_BASE_PORT:-7001}
PORTS=("$ZARIS_BASE_PORT" $((ZARIS_BASE_PORT + 1)) $((ZARIS_BASE_PORT + 2)))
passed=0
failed=0

cleanup() {
  "$ROOT/scripts/local-cluster.sh" stop || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# cli PORT ARGS... runs redis-cli in cluster mode (following MOVED) against the node at PORT.
cli() {
  local port=$1
  shift
  redis-cli -c -p "$port" "$@"
}

# check NAME WANT GOT records one assertion.
check() {
  if [[ $3 == "$2" ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n  want: %q\n  got:  %q\n' "$1" "$2" "$3"
  fi
}

"$ROOT/scripts/local-cluster.sh" start 3

echo "== cluster state and slots"
for port in "${PORTS[@]}"; do
  check "cluster_state on $port" "cluster_state:ok" "$(cli "$port" cluster info | tr -d '\r' | grep '^cluster_state:')"
  # CLUSTER SLOTS prints start, end, host, port, id for each range, one per line.
  covered=$(cli "$port" cluster slots | awk 'NR % 5 == 1 { s = $1 } NR % 5 == 2 { n += $1 - s + 1 } END { print n }')
  check "CLUSTER SLOTS covers every slot on $port" 16384 "$covered"
  check "CLUSTER NODES lists 3 nodes on $port" 3 "$(cli "$port" cluster nodes | grep -c master)"
done
check "CLUSTER KEYSLOT" 12182 "$(cli "${PORTS[0]}" cluster keyslot foo)"
check "CLUSTER KEYSLOT with a hash tag" "$(cli "${PORTS[0]}" cluster keyslot user1000)" "$(cli "${PORTS[0]}" cluster keyslot '{user1000}.following')"

echo "== SET and GET through every node"
for i in $(seq 1 60); do
  check "SET key:$i" OK "$(cli "${PORTS[i % 3]}" set "key:$i" "value-$i")"
done
for i in $(seq 1 60); do
  check "GET key:$i" "value-$i" "$(cli "${PORTS[(i + 1) % 3]}" get "key:$i")"
done
check "GET of a missing key" "" "$(cli "${PORTS[0]}" get no-such-key)"
check "SET NX on an existing key" "" "$(cli "${PORTS[1]}" set key:1 other NX)"
check "SET XX GET" "value-1" "$(cli "${PORTS[2]}" set key:1 newer XX GET)"
check "GET after SET XX" "newer" "$(cli "${PORTS[0]}" get key:1)"

echo "== counters"
check "INCR" 1 "$(cli "${PORTS[0]}" incr counter)"
check "INCR again" 2 "$(cli "${PORTS[1]}" incr counter)"
check "INCRBY" 12 "$(cli "${PORTS[2]}" incrby counter 10)"
check "DECRBY" 5 "$(cli "${PORTS[0]}" decrby counter 7)"
check "DECR" 4 "$(cli "${PORTS[1]}" decr counter)"
check "INCR on text" "ERR value is not an integer or out of range" "$(cli "${PORTS[0]}" incr key:2)"

echo "== TTL"
check "SET EX" OK "$(cli "${PORTS[0]}" set session abc EX 100)"
ttl=$(cli "${PORTS[1]}" ttl session)
check "TTL within 98..100" yes "$( ((ttl >= 98 && ttl <= 100)) && echo yes || echo "no ($ttl)")"
pttl=$(cli "${PORTS[2]}" pttl session)
check "PTTL within 98000..100000" yes "$( ((pttl >= 98000 && pttl <= 100000)) && echo yes || echo "no ($pttl)")"
check "EXPIRE" 1 "$(cli "${PORTS[0]}" expire session 500)"
check "PERSIST" 1 "$(cli "${PORTS[1]}" persist session)"
check "TTL without expiry" -1 "$(cli "${PORTS[2]}" ttl session)"
check "TTL of a missing key" -2 "$(cli "${PORTS[0]}" ttl no-such-key)"

echo "== multi-key commands within a hash tag"
check "MSET" OK "$(cli "${PORTS[0]}" mset '{user:1}:name' ada '{user:1}:lang' go)"
check "MGET" $'ada\n\ngo' "$(cli "${PORTS[1]}" mget '{user:1}:name' '{user:1}:missing' '{user:1}:lang')"
check "EXISTS" 2 "$(cli "${PORTS[2]}" exists '{user:1}:name' '{user:1}:lang' '{user:1}:missing')"
check "DEL" 2 "$(cli "${PORTS[0]}" del '{user:1}:name' '{user:1}:lang')"
check "CROSSSLOT" "CROSSSLOT Keys in request don't hash to the same slot" "$(cli "${PORTS[0]}" mget a b 2>&1)"

echo "== redis-benchmark --cluster"
bench=$(redis-benchmark --cluster -p "${PORTS[0]}" -t set,get -n 20000 --csv 2>&1)
echo "$bench"
check "redis-benchmark reports no error" 0 "$(grep -ci 'error' <<<"$bench" || true)"
for test in SET GET; do
  rps=$(awk -F'"' -v t="$test" '$2 == t { print $4 }' <<<"$bench")
  check "redis-benchmark $test completed" yes "$(awk -v r="${rps:-0}" 'BEGIN { print (r > 0) ? "yes" : "no" }')"
done
check "the cluster still serves after the benchmark" "value-5" "$(cli "${PORTS[2]}" get key:5)"

echo "$passed passed, $failed failed"
((failed == 0))
