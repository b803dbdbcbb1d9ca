#!/usr/bin/env bash
# The JavaScript client against the Go client, in the same run, on one node
# (issue 15's target: Node at 16 concurrent acquire+release loops, at least
# 0.7 of the Go client's uncontended cycles/s). Alternates, for --runs
# rounds: baton-bench's uncontended workload with the official Go client
# (h2c), cmd/baton-bench/js-bench.mjs with baton-node.js (node:http2, h2c:
# what a Node user gets), with baton.js over Node's fetch (HTTP/1.1), and
# with baton.js over a node:http keep-alive transport; then prints the
# medians and the ratios. Each round prints the load average: on a shared
# machine, compare only figures of the same run.
#   scripts/js-bench.sh [runs=5] [seconds=5] [loops=16]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5} secs=${2:-5} c=${3:-16}

dir=$(mktemp -d)
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/baton" ./cmd/baton
go build -o "$dir/baton-bench" ./cmd/baton-bench
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
"$dir/baton" serve --listen "127.0.0.1:$port" --data-dir "$dir/data" --log-level warn &
pid=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
go_rates=() h2_rates=() fetch_rates=() http_rates=()
for r in $(seq "$runs"); do
	g=$("$dir/baton-bench" --addr "127.0.0.1:$port" --pid "$pid" --workload uncontended --client official --proto h2c \
		--c "$c" --duration "${secs}s" --runs 1 --ref none --progress off | sed -n 's/^RESULT .* ops_s=\([0-9]*\) .*/\1/p')
	jl=$(node cmd/baton-bench/js-bench.mjs --addr "http://127.0.0.1:$port" --c "$c" --duration "$secs" --transport http2)
	j=$(sed -n 's/.*"cycles_per_sec":\([0-9]*\).*/\1/p' <<<"$jl")
	ju=$(sed -n 's/.*"cpu_us_per_cycle":\([0-9]*\).*/\1/p' <<<"$jl")
	fl=$(node cmd/baton-bench/js-bench.mjs --addr "http://127.0.0.1:$port" --c "$c" --duration "$secs" --transport fetch)
	f=$(sed -n 's/.*"cycles_per_sec":\([0-9]*\).*/\1/p' <<<"$fl")
	fu=$(sed -n 's/.*"cpu_us_per_cycle":\([0-9]*\).*/\1/p' <<<"$fl")
	h=$(node cmd/baton-bench/js-bench.mjs --addr "http://127.0.0.1:$port" --c "$c" --duration "$secs" --transport node-http |
		sed -n 's/.*"cycles_per_sec":\([0-9]*\).*/\1/p')
	echo "run $r/$runs: go official h2c $g cycles/s, js (baton-node.js, http2) $j ($ju µs CPU/cycle), js (Node fetch) $f ($fu µs CPU/cycle), js (node:http transport) $h  (load $(cut -d' ' -f1 /proc/loadavg))"
	go_rates+=("$g") h2_rates+=("$j") fetch_rates+=("$f") http_rates+=("$h")
done
gm=$(printf '%s\n' "${go_rates[@]}" | median)
jm=$(printf '%s\n' "${h2_rates[@]}" | median)
fm=$(printf '%s\n' "${fetch_rates[@]}" | median)
hm=$(printf '%s\n' "${http_rates[@]}" | median)
echo "median of $runs, c=$c, ${secs}s each, Node $(node --version):"
echo "  Go client (api, h2c)            $gm cycles/s"
echo "  baton-node.js, node:http2 (h2c) $jm cycles/s  ratio $(awk "BEGIN{printf \"%.2f\", $jm/$gm}")"
echo "  baton.js, Node fetch            $fm cycles/s  ratio $(awk "BEGIN{printf \"%.2f\", $fm/$gm}")"
echo "  baton.js, node:http transport   $hm cycles/s  ratio $(awk "BEGIN{printf \"%.2f\", $hm/$gm}")"
