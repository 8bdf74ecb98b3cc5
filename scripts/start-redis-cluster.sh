#!/usr/bin/env bash
# Starts a throw-away Redis Cluster on loopback for tests and benchmarks, or
# stops it: 3 masters and 3 replicas, each node a redis-server in cluster mode
# with its own directory under DIR.
#
#   scripts/start-redis-cluster.sh [start] [DIR]   start the nodes in DIR (a new temp dir
#                                                  when omitted), create the cluster, wait
#                                                  for cluster_state:ok on every node and
#                                                  every replica's first sync, and print
#                                                  the seed addresses, comma-separated
#   scripts/start-redis-cluster.sh stop DIR        stop every node of DIR (no save)
#   scripts/start-redis-cluster.sh seeds DIR       print the seed addresses again
#   scripts/start-redis-cluster.sh restart DIR [N...]
#                                                  start nodes N (1-6; every node when none
#                                                  is named) of a cluster made in DIR again,
#                                                  on their old ports with their nodes.conf,
#                                                  after a stop or a kill; wait as start does
#                                                  and print the seeds
#
# CLUSTER_NODE_TIMEOUT (milliseconds, default 2000) is each node's
# cluster-node-timeout: a master that does not answer for this long is failed
# over to its replica. Fault tests lower it to time failovers quickly.
#
# Ports (client and cluster bus) are chosen by the kernel a moment before a
# node starts; another process may bind one first, and the node then fails to
# start: it is retried on new ports, twice. Nodes keep no data on disk (no RDB,
# no AOF): the cluster is for tests, never for data that matters. Debian's
# binaries are used by full path (REDIS_BIN, default /usr/bin).
set -euo pipefail

REDIS_BIN=${REDIS_BIN:-/usr/bin}
NODES=6
WAIT=${CLUSTER_WAIT:-60} # seconds a broken start may take before giving up
NODE_TIMEOUT=${CLUSTER_NODE_TIMEOUT:-2000}

die() { echo "start-redis-cluster: $*" >&2; exit 1; }

[ -x "$REDIS_BIN/redis-server" ] && [ -x "$REDIS_BIN/redis-cli" ] ||
	die "no redis-server/redis-cli in $REDIS_BIN (scripts/install-deps.sh installs redis)"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

cli() { "$REDIS_BIN/redis-cli" -h 127.0.0.1 "$@"; }

seeds_of() {
	local out="" i
	for i in $(seq 1 $NODES); do
		out="$out${out:+,}127.0.0.1:$(cat "$1/node$i/port")"
	done
	echo "$out"
}

# stop_nodes DIR...: SIGTERM every node at once (a node takes about two
# seconds to exit), then wait; SIGKILL a node still running after 10 s.
stop_nodes() {
	local d pid pids=""
	for d in "$@"; do
		[ -f "$d/redis.pid" ] || continue
		pid=$(cat "$d/redis.pid" 2>/dev/null || true)
		[ -n "$pid" ] && kill "$pid" 2>/dev/null && pids="$pids $pid"
	done
	for pid in $pids; do
		for _ in $(seq 1 200); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
	done
	for d in "$@"; do rm -f "$d/redis.pid"; done
}

cmd=start
case "${1:-}" in
start | stop | seeds | restart) cmd=$1; shift ;;
esac
dir=${1:-}

case $cmd in
stop)
	[ -n "$dir" ] || die "usage: $0 stop DIR"
	stop_nodes "$dir"/node*
	exit 0
	;;
seeds)
	[ -n "$dir" ] || die "usage: $0 seeds DIR"
	seeds_of "$dir"
	exit 0
	;;
esac

# wait_cluster waits after a restart as start waits after creating the
# cluster: every node must see cluster_state:ok and the whole cluster, 6
# nodes of which 3 are replicas not flagged as failed, and each replica must
# have finished its first sync with its master.
wait_cluster() {
	local deadline=$((SECONDS + WAIT)) i port
	for i in $(seq 1 $NODES); do
		port=$(cat "$dir/node$i/port")
		until cli -p "$port" cluster info 2>/dev/null | grep -q "cluster_state:ok" &&
			[ "$(cli -p "$port" cluster nodes 2>/dev/null | grep -c .)" -eq $NODES ] &&
			[ "$(cli -p "$port" cluster nodes 2>/dev/null | grep -v fail | grep -c slave)" -eq $((NODES / 2)) ]; do
			[ $SECONDS -lt $deadline ] || die "node $i ($port) did not reach cluster_state:ok"
			sleep 0.1
		done
		if cli -p "$port" info replication | grep -q "role:slave"; then
			until cli -p "$port" info replication | grep -q "master_link_status:up"; do
				[ $SECONDS -lt $deadline ] || die "replica $i ($port) did not sync with its master"
				sleep 0.1
			done
		fi
	done
}

if [ "$cmd" = restart ]; then
	[ -n "$dir" ] || die "usage: $0 restart DIR [N...]"
	shift
	nodes=${*:-$(seq 1 $NODES)}
	for i in $nodes; do
		d="$dir/node$i"
		[ -f "$d/redis.conf" ] || die "no node $i in $dir"
		port=$(cat "$d/port")
		if [ "$(cli -p "$port" ping 2>/dev/null || true)" = PONG ]; then
			continue # still running
		fi
		rm -f "$d/redis.pid"
		"$REDIS_BIN/redis-server" "$d/redis.conf" || die "node $i did not start again"
		deadline=$((SECONDS + WAIT))
		until [ "$(cli -p "$port" ping 2>/dev/null || true)" = PONG ]; do
			[ $SECONDS -lt $deadline ] || die "node $i ($port) did not start again: $(tail -5 "$d/redis.log")"
			sleep 0.05
		done
	done
	wait_cluster
	seeds_of "$dir"
	exit 0
fi

[ -n "$dir" ] || dir=$(mktemp -d /tmp/throttlekit-cluster.XXXXXX)
mkdir -p "$dir"

# start_node N: start node N on fresh ports; fails if it does not answer.
start_node() {
	local d="$dir/node$1" port bus
	mkdir -p "$d"
	rm -f "$d/nodes.conf" "$d/redis.log"
	port=$(free_port)
	bus=$(free_port)
	echo "$port" >"$d/port"
	cat >"$d/redis.conf" <<CONF
bind 127.0.0.1
port $port
cluster-enabled yes
cluster-port $bus
cluster-config-file $d/nodes.conf
cluster-node-timeout $NODE_TIMEOUT
dir $d
save ""
appendonly no
shutdown-timeout 0
repl-diskless-sync-delay 0
daemonize yes
pidfile $d/redis.pid
logfile $d/redis.log
CONF
	"$REDIS_BIN/redis-server" "$d/redis.conf" || return 1
	local deadline=$((SECONDS + WAIT))
	while [ $SECONDS -lt $deadline ]; do
		if [ "$(cli -p "$port" ping 2>/dev/null || true)" = PONG ]; then
			return 0
		fi
		if grep -qE "Address already in use|Could not create server TCP" "$d/redis.log" 2>/dev/null; then
			stop_nodes "$d"
			return 1
		fi
		sleep 0.05
	done
	return 1
}

for i in $(seq 1 $NODES); do
	ok=
	for try in 1 2 3; do
		if start_node "$i"; then ok=1; break; fi
	done
	[ -n "$ok" ] || die "node $i did not start: $(tail -5 "$dir/node$i/redis.log" 2>/dev/null)"
done

addrs=$(seeds_of "$dir" | tr ',' ' ')
# shellcheck disable=SC2086
cli --cluster create $addrs --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
	die "redis-cli --cluster create failed: $(tail -5 "$dir/create.log")"

# Every node must see cluster_state:ok and the whole cluster, and every
# replica must have synced (wait_cluster).
wait_cluster
echo "start-redis-cluster: nodes in $dir (stop: $0 stop $dir)" >&2
seeds_of "$dir"
