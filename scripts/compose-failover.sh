#!/usr/bin/env bash
# compose-failover.sh: the three-node Docker Compose cluster, end to end.
#
#   1. builds the static baton binary and a FROM-scratch image of it
#      (deploy/Dockerfile; nothing is pulled),
#   2. starts docker-compose.yml (node1..node3) and waits for exactly one
#      active, node1 (the first in peers), that every node agrees on,
#   3. takes a lock through a standby: a 307 to the active, then the grant
#      with curl -L; waits until the standbys replicated it,
#   4. takes one more lock on the active directly and, at once, kills the
#      active container (docker kill = SIGKILL),
#   5. measures the time until the next node (node2) grants a lock, prints
#      failover_s=..., and checks: the held lock is still held there with its
#      token, the new token is above every token the dead node issued, the
#      holder can still release it,
#   6. tears everything down (down -v), also on failure.
#
# Exits non-zero on any failed check. A missing tool or an unreachable Docker
# daemon is a failure, not a skip: CI runs this.
#
# Environment (all optional):
#   BATON_BIN                  use this static binary instead of building one
#   BATON_IMAGE                image tag (default baton:compose)
#   BATON_NODE1_PORT..3        host ports (default: the first free three from 7071)
#   BATON_CLUSTER_SECRET       default: a random one per run
#   COMPOSE_FAILOVER_MAX_S     largest accepted failover time (default 5)
#   COMPOSE_FAILOVER_DEADLINE_S  bound on the run after the build (default 150)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

say() { printf 'compose-failover: %s\n' "$*" >&2; }
fail() {
	say "FAIL: $*"
	exit 1
}

# tick sets NOW to the time in ms (bash 5: without forking date).
if [ -n "${EPOCHREALTIME:-}" ]; then
	tick() { local t=${EPOCHREALTIME//[!0-9]/}; NOW=$((t / 1000)); }
else
	tick() { NOW=$(($(date +%s%N) / 1000000)); }
fi
now_ms() { tick && echo "$NOW"; }
START_MS=$(now_ms)
# Every wait below is bounded; this is the bound for the whole run after the
# build (a cold Go build cache alone can take minutes on a small machine).
DEADLINE_S=${COMPOSE_FAILOVER_DEADLINE_S:-150}
MAX_FAILOVER_S=${COMPOSE_FAILOVER_MAX_S:-5}

# --- tools ------------------------------------------------------------------
for t in docker curl; do
	command -v "$t" >/dev/null 2>&1 || fail "'$t' is not installed"
done
if [ -z "${BATON_BIN:-}" ]; then
	command -v go >/dev/null 2>&1 || fail "'go' is not installed (or set BATON_BIN to a static baton binary)"
fi
# A hung daemon or build must not hang CI: bound them where coreutils'
# timeout exists.
TIMEOUT=() TIMEOUT_SHORT=()
if command -v timeout >/dev/null 2>&1; then
	TIMEOUT=(timeout 120) TIMEOUT_SHORT=(timeout 20)
fi
if ! "${TIMEOUT_SHORT[@]}" docker info >/dev/null 2>&1; then
	"${TIMEOUT_SHORT[@]}" docker info 2>&1 | sed 's/^/  docker info: /' >&2 || true
	fail "the Docker daemon is not reachable (is it running, may this user use it?)"
fi
if docker compose version >/dev/null 2>&1; then
	COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
	COMPOSE=(docker-compose)
else
	fail "neither 'docker compose' nor 'docker-compose' is installed"
fi
export BATON_IMAGE=${BATON_IMAGE:-baton:compose}
if [ -z "${BATON_CLUSTER_SECRET:-}" ]; then
	BATON_CLUSTER_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
fi
export BATON_CLUSTER_SECRET
PROJECT=batonfailover$$
DC=("${COMPOSE[@]}" -f "$ROOT/docker-compose.yml" -p "$PROJECT")
CTX=$(mktemp -d)
UP=0

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "$UP" = 1 ]; then
		if [ "$rc" != 0 ]; then
			say "logs of the failed run:"
			"${DC[@]}" logs --no-color --tail=40 >&2 2>&1 || true
		fi
		say "tearing down ($PROJECT)"
		"${TIMEOUT[@]}" "${DC[@]}" down -v --remove-orphans >/dev/null 2>&1 ||
			say "WARNING: '${DC[*]} down -v' failed; remove project $PROJECT by hand"
	fi
	rm -rf "$CTX"
	if [ "$rc" = 0 ]; then say "PASS"; else say "FAILED (exit $rc)"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- build ------------------------------------------------------------------
if [ -n "${BATON_BIN:-}" ]; then
	cp "$BATON_BIN" "$CTX/baton"
else
	say "building the static binary"
	bi=github.com/baton-io/baton/internal/buildinfo
	CGO_ENABLED=0 go build -trimpath -o "$CTX/baton" \
		-ldflags "-X $bi.version=$(git describe --tags --always --dirty 2>/dev/null || echo '(devel)') -X $bi.commit=$(git rev-parse HEAD 2>/dev/null)" \
		./cmd/baton || fail "go build"
fi
mkdir "$CTX/data"
cp deploy/Dockerfile "$CTX/Dockerfile"
say "building image $BATON_IMAGE"
"${TIMEOUT[@]}" docker build -q -t "$BATON_IMAGE" "$CTX" >/dev/null || fail "docker build"
START_MS=$(now_ms) # the deadline counts from here

remaining_ok() { [ $(($(now_ms) - START_MS)) -lt $((DEADLINE_S * 1000)) ]; }

# --- ports ------------------------------------------------------------------
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -z "${BATON_NODE1_PORT:-}${BATON_NODE2_PORT:-}${BATON_NODE3_PORT:-}" ]; then
	free=()
	p=7071
	while [ "${#free[@]}" -lt 3 ] && [ "$p" -lt 7200 ]; do
		port_busy "$p" || free+=("$p")
		p=$((p + 1))
	done
	[ "${#free[@]}" = 3 ] || fail "no three free ports in 7071..7199"
	BATON_NODE1_PORT=${free[0]} BATON_NODE2_PORT=${free[1]} BATON_NODE3_PORT=${free[2]}
fi
: "${BATON_NODE1_PORT:?set all of BATON_NODE1_PORT..BATON_NODE3_PORT or none}"
: "${BATON_NODE2_PORT:?set all of BATON_NODE1_PORT..BATON_NODE3_PORT or none}"
: "${BATON_NODE3_PORT:?set all of BATON_NODE1_PORT..BATON_NODE3_PORT or none}"
export BATON_NODE1_PORT BATON_NODE2_PORT BATON_NODE3_PORT
PORT=([1]="$BATON_NODE1_PORT" [2]="$BATON_NODE2_PORT" [3]="$BATON_NODE3_PORT")
# The nodes advertise http://nodeN:PORT (PORT the same inside and outside), so
# curl reaches the host of a 307 Location through --resolve.
RESOLVE=()
for n in 1 2 3; do RESOLVE+=(--resolve "node$n:${PORT[$n]}:127.0.0.1"); done
url() { echo "http://127.0.0.1:${PORT[$1]}"; }
node_of() { # http://nodeN:PORT -> N
	local r
	case "$1" in http://node[123]:*) r=${1#http://node} && echo "${r%%:*}" ;; *) echo "" ;; esac
}

# Compact JSON from baton, one object: the first "name":value. The fields read
# here (role, active, last_token, token) come before any nested one of the
# same name.
jnum() { grep -o "\"$2\":[0-9][0-9]*" <<<"$1" | head -1 | cut -d: -f2; }
jfirst() { grep -o "\"$2\":\"[^\"]*\"" <<<"$1" | head -1 | cut -d'"' -f4; }

CURL=(curl -sS --max-time 2)
cluster_of() { "${CURL[@]}" "$(url "$1")/cluster" 2>/dev/null || true; }

# --- up ---------------------------------------------------------------------
say "starting $PROJECT with ${COMPOSE[*]} (ports ${PORT[1]} ${PORT[2]} ${PORT[3]})"
UP=1
"${TIMEOUT[@]}" "${DC[@]}" up -d >/dev/null 2>&1 || {
	"${DC[@]}" up -d 2>&1 | tail -20 >&2 || true
	fail "${COMPOSE[*]} up -d"
}

say "waiting for exactly one active, node1, agreed by all three"
ok=0
deadline=$(($(now_ms) + 30000))
while [ "$(now_ms)" -lt "$deadline" ]; do
	actives=0 agree=0
	for n in 1 2 3; do
		c=$(cluster_of "$n")
		r=$(jfirst "$c" role)
		a=$(jfirst "$c" active)
		[ "$r" = active ] && actives=$((actives + 1))
		[ "$(node_of "$a")" = 1 ] && agree=$((agree + 1))
	done
	if [ "$actives" = 1 ] && [ "$agree" = 3 ] && [ "$(jfirst "$(cluster_of 1)" role)" = active ]; then
		ok=1
		break
	fi
	sleep 0.2
done
[ "$ok" = 1 ] || fail "no single active node1 within 30 s (actives=$actives agreeing=$agree)"
for n in 1 2 3; do
	code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$(url "$n")/readyz" || true)
	want=503
	[ "$n" = 1 ] && want=200
	[ "$code" = "$want" ] || fail "GET /readyz on node$n: $code, want $want"
done
say "node1 active, node2 and node3 standby"

# --- a lock through a standby ----------------------------------------------
KEY=compose/held
out=$("${CURL[@]}" -X POST -o /dev/null -w '%{http_code} %{redirect_url}' "$(url 2)/locks/$KEY?lease=120&wait=5") || fail "POST via node2"
code=${out%% *} loc=${out#* }
[ "$code" = 307 ] || fail "POST /locks/$KEY on standby node2: $code, want 307"
[ "$loc" = "http://node1:${PORT[1]}/locks/$KEY?lease=120&wait=5" ] ||
	fail "307 Location from node2: '$loc', want http://node1:${PORT[1]}/locks/$KEY?lease=120&wait=5"
say "standby node2 answers 307 -> $loc (nothing acquired)"

body=$("${CURL[@]}" -L "${RESOLVE[@]}" -X POST -w '\n%{http_code} %{num_redirects}' "$(url 2)/locks/$KEY?lease=120&wait=5") || fail "POST -L via node2"
status=$(tail -1 <<<"$body")
body=$(head -n -1 <<<"$body")
[ "$status" = "200 1" ] || fail "POST -L /locks/$KEY via node2: '$status' (code, redirects), want '200 1': $body"
HELD=$(jnum "$body" token)
[ -n "$HELD" ] || fail "no token in the grant: $body"
[ "$(jfirst "$body" node)" = "http://node1:${PORT[1]}" ] || fail "grant not from node1: $body"
say "granted $KEY through the standby: token $HELD"

say "waiting for both standbys to replicate token $HELD"
deadline=$(($(now_ms) + 10000))
for n in 2 3; do
	while :; do
		lt=$(jnum "$(cluster_of "$n")" last_token)
		[ -n "$lt" ] && [ "$lt" -ge "$HELD" ] && break
		[ "$(now_ms)" -lt "$deadline" ] || fail "node$n did not replicate token $HELD within 10 s (last_token '$lt')"
		sleep 0.1
	done
done

# --- kill the active ----------------------------------------------------------
ACTIVE_ID=$("${DC[@]}" ps -q node1)
[ -n "$ACTIVE_ID" ] || fail "no container for node1"
# One more grant right before the kill: it may not reach the standbys, and the
# new active must still continue above it.
body=$("${CURL[@]}" -X POST "$(url 1)/locks/compose/last?lease=60&wait=5") || fail "POST on node1"
LAST=$(jnum "$body" token)
[ -n "$LAST" ] && [ "$LAST" -gt "$HELD" ] || fail "second grant on node1: '$body'"
# docker kill returns late (it waits for the container to be reaped), so it
# runs in the background while the probes start; the failover time is counted
# from the moment the daemon saw node1 exit (State.FinishedAt).
T_ISSUE=$(now_ms)
docker kill "$ACTIVE_ID" >/dev/null &
KILL_PID=$!

# Each probe is a fresh key on one of the standbys (alternating), redirects
# followed: until a standby counts node1 as dead it sends the call to node1
# (refused), then the promoted node grants it or the other standby sends it
# there. A probe that node1 still granted before the kill landed does not
# count, but raises the token the new active must continue above.
NEW="" NEWNODE=""
i=0
deadline=$((T_ISSUE + 20000))
tick
while [ "$NOW" -lt "$deadline" ]; do
	i=$((i + 1))
	n=$((2 + i % 2))
	out=$(curl -sS -L "${RESOLVE[@]}" --max-time 3 -X POST -w '\n%{http_code}' "http://127.0.0.1:${PORT[$n]}/locks/compose/probe-$i?lease=10&wait=1" 2>/dev/null) || out=""
	tick
	if [ "${out##*$'\n'}" = 200 ]; then
		tok=$(jnum "$out" token)
		by=$(node_of "$(jfirst "$out" node)")
		[ -n "$tok" ] && [ -n "$by" ] || fail "probe grant without token or node: $out"
		if [ "$by" = 1 ]; then
			# Sent to node1 before the SIGKILL landed: an old-active grant
			# the new active must also continue above.
			[ "$tok" -gt "$LAST" ] && LAST=$tok
		else
			NEW=$tok NEWNODE=$by T1=$NOW
			break
		fi
	fi
	sleep 0.02
	tick
done
wait "$KILL_PID" || fail "docker kill node1"
[ -n "$NEW" ] || fail "no node granted within 20 s of the kill"
finished=$(docker inspect -f '{{.State.FinishedAt}}' "$ACTIVE_ID") || fail "docker inspect node1"
ns=$(date -d "$finished" +%s%N 2>/dev/null) || fail "cannot read node1's exit time '$finished'"
T0=$((ns / 1000000))
[ "$T0" -ge $((T_ISSUE - 1000)) ] && [ "$T0" -le "$T1" ] || fail "node1's exit time $finished is not between the kill and the grant"
say "killed node1 (SIGKILL) right after it granted token $LAST; it exited $((T0 - T_ISSUE)) ms after the kill was issued"
ms=$((T1 - T0))
FAILOVER=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
echo "failover_s=$FAILOVER"
say "node$NEWNODE granted compose/probe-$i with token $NEW, $FAILOVER s after node1 died"
# The server side of it: node2's own log line of its promotion (the client
# measurement above adds the probes' round trips).
promoted=$(docker logs "$("${DC[@]}" ps -q "node$NEWNODE")" 2>&1 | grep 'msg="promoted to active"' | tail -1 | sed -n 's/^time=\([^ ]*\) .*/\1/p')
if [ -n "$promoted" ] && pns=$(date -d "$promoted" +%s%N 2>/dev/null); then
	pms=$((pns / 1000000 - T0))
	echo "promoted_s=$(printf '%d.%03d' $((pms / 1000)) $((pms % 1000)))"
else
	say "WARNING: no promotion line in node$NEWNODE's log"
fi

[ "$NEWNODE" = 2 ] || fail "node$NEWNODE took over, want node2 (the highest-priority live node)"
[ "$ms" -le $((MAX_FAILOVER_S * 1000)) ] || fail "failover took $FAILOVER s, more than $MAX_FAILOVER_S s"
[ "$NEW" -gt "$LAST" ] || fail "new token $NEW is not above $LAST, the last token node1 granted before it died"
[ "$NEW" -gt "$HELD" ] || fail "new token $NEW is not above $HELD"

body=$("${CURL[@]}" "$(url 2)/locks/$KEY") || fail "GET /locks/$KEY on node2"
got=$(jnum "$body" token)
[ "$got" = "$HELD" ] || fail "after failover node2 shows $KEY held by token '$got', want $HELD: $body"
say "$KEY is still held with token $HELD on node2"

deadline=$(($(now_ms) + 10000))
while :; do
	c=$(cluster_of 3)
	[ "$(jfirst "$c" role)" = standby ] && [ "$(node_of "$(jfirst "$c" active)")" = 2 ] && break
	[ "$(now_ms)" -lt "$deadline" ] || fail "node3 does not follow node2 within 10 s: $c"
	sleep 0.1
done
code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$(url 2)/readyz" || true)
[ "$code" = 200 ] || fail "GET /readyz on node2: $code, want 200"

body=$("${CURL[@]}" -L "${RESOLVE[@]}" -X DELETE -H "Lock-Token: $HELD" -w '\n%{http_code}' "$(url 3)/locks/$KEY") || fail "DELETE via node3"
[ "$(tail -1 <<<"$body")" = 200 ] || fail "release of $KEY with token $HELD via node3 -> node2: $body"
say "the holder released $KEY with its old token through node3"

remaining_ok || fail "the run took more than $DEADLINE_S s"
say "all checks passed in $((($(now_ms) - START_MS) / 1000)) s"
