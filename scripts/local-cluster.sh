#!/usr/bin/env bash
# Runs a Zaris cluster of N server processes (cmd/zaris) on loopback.
#
#   scripts/local-cluster.sh start [N]   build cmd/zaris, start N nodes (default 3), wait until they serve
#   scripts/local-cluster.sh stop        stop them (SIGTERM: a graceful leave), then clean up
#   scripts/local-cluster.sh status      print CLUSTER INFO of the first node
#
# Node i (1-based) serves RESP on 127.0.0.1:$((BASE+i-1)), gossips on BASE+10000+i-1 and carries data on
# BASE+20000+i-1, with BASE=7001 unless ZARIS_BASE_PORT says otherwise. Pid and log files live in
# ZARIS_CLUSTER_DIR (default: a folder under ${TMPDIR:-/tmp}). ZARIS_RF sets the replication factor
# (default 1), ZARIS_PASSWORD a RESP password, ZARIS_HTTP_BASE a first port for per-node operations endpoints (metrics,
# status page, probes and pprof),
# and any other ZARIS_* variable named after a flag reaches every node as that flag.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${ZARIS_CLUSTER_DIR:-${TMPDIR:-/tmp}/zaris-local-cluster}
BASE=${ZARIS_BASE_PORT:-7001}
WAIT_SECONDS=${ZARIS_WAIT_SECONDS:-60}

resp_port() { echo $((BASE + $1 - 1)); }
gossip_port() { echo $((BASE + 10000 + $1 - 1)); }
data_port() { echo $((BASE + 20000 + $1 - 1)); }

# resp_query PORT COMMAND... sends one inline command (after AUTH when a password is set) and prints the
# raw reply; it needs nothing but bash.
resp_query() {
  local port=$1
  shift
  local auth=""
  if [[ -n ${ZARIS_PASSWORD:-} ]]; then auth="AUTH ${ZARIS_PASSWORD}\r\n"; fi
  timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf '${auth}%s\r\nQUIT\r\n' \"\$*\" >&3 && cat <&3" _ "$@" 2>/dev/null
}

cluster_ok() { [[ $(resp_query "$1" CLUSTER INFO) == *cluster_state:ok* ]]; }

# port_taken PORT succeeds when something already accepts connections on 127.0.0.1:PORT.
port_taken() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# refuse_taken_ports N fails if any port the N nodes would listen on is in use: nodes that cannot bind
# would leave whatever holds the port answering in their place.
refuse_taken_ports() {
  local n=$1 port
  for i in $(seq 1 "$n"); do
    for port in "$(resp_port "$i")" "$(gossip_port "$i")" "$(data_port "$i")" ${ZARIS_HTTP_BASE:+$((ZARIS_HTTP_BASE + i - 1))}; do
      if port_taken "$port"; then
        echo "port $port is already in use (another cluster?); stop what holds it or set ZARIS_BASE_PORT" >&2
        exit 1
      fi
    done
  done
}

start() {
  local n=${1:-3}
  mkdir -p "$DIR"
  if compgen -G "$DIR/*.pid" >/dev/null; then
    echo "a cluster is already running from $DIR; stop it first" >&2
    exit 1
  fi
  refuse_taken_ports "$n"
  echo "building cmd/zaris"
  (cd "$ROOT" && go build -o "$DIR/zaris" ./cmd/zaris)
  echo "$n" >"$DIR/size"
  for i in $(seq 1 "$n"); do
    local join=""
    if ((i > 1)); then join="127.0.0.1:$(gossip_port 1)"; fi
    local http="" pprof=false
    if [[ -n ${ZARIS_HTTP_BASE:-} ]]; then http="127.0.0.1:$((ZARIS_HTTP_BASE + i - 1))" pprof=true; fi
    ZARIS_RF=${ZARIS_RF:-1} setsid "$DIR/zaris" \
      --name "zaris-$i" \
      --resp-addr "127.0.0.1:$(resp_port "$i")" \
      --gossip-addr "127.0.0.1:$(gossip_port "$i")" \
      --data-addr "127.0.0.1:$(data_port "$i")" \
      --join "$join" \
      --bootstrap-expect "$n" \
      --timing "${ZARIS_TIMING:-local}" \
      --http-addr "$http" --pprof="$pprof" \
      </dev/null >"$DIR/zaris-$i.log" 2>&1 &
    echo $! >"$DIR/zaris-$i.pid"
  done
  wait_serving "$n"
}

# wait_serving N waits until every node says cluster_state:ok, or fails with the logs of the nodes.
wait_serving() {
  local n=$1 deadline=$((SECONDS + WAIT_SECONDS))
  for i in $(seq 1 "$n"); do
    until cluster_ok "$(resp_port "$i")"; do
      if ! kill -0 "$(cat "$DIR/zaris-$i.pid")" 2>/dev/null || ((SECONDS > deadline)); then
        echo "node zaris-$i is not serving; its log:" >&2
        tail -n 30 "$DIR/zaris-$i.log" >&2
        stop
        exit 1
      fi
      sleep 0.2
    done
  done
  echo "cluster of $n nodes serving: RESP on 127.0.0.1:$(resp_port 1)..$(resp_port "$n") (logs in $DIR)"
}

stop() {
  local pids=()
  for f in "$DIR"/*.pid; do
    [[ -e $f ]] || continue
    local pid
    pid=$(cat "$f")
    if kill -TERM "$pid" 2>/dev/null; then pids+=("$pid"); fi
    rm -f "$f"
  done
  local deadline=$((SECONDS + 20))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS > deadline)); then
        echo "node $pid did not leave in time; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.1
    done
  done
  echo "cluster stopped"
}

status() { resp_query "$(resp_port 1)" CLUSTER INFO | tr -d '\r'; }

case ${1:-} in
start) start "${2:-3}" ;;
stop) stop ;;
status) status ;;
*)
  echo "usage: $0 start [N] | stop | status" >&2
  exit 2
  ;;
esac
