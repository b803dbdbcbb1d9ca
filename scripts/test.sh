#!/usr/bin/env bash
# The whole test suite, runnable on a fresh Debian machine with Go and a
# Docker engine: it installs what the tests drive (curl, chromium, nodejs,
# iptables) and
# what -race builds with (gcc, libc6-dev), and git, when they
# are missing, then runs, stopping at the first failure:
#   gofmt, go vet, every Go test with the race detector (unit, HTTP,
#   headless-browser, hostile-client and OpenAPI-staleness tests), the cluster
#   tests with real processes and real faults, each fuzz target for a bounded
#   time, and the Docker Compose failover script.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v git >/dev/null || missing+=(git)
# -race needs cgo: a C compiler and the C library's headers (Debian's gcc
# only recommends libc6-dev, which --no-install-recommends leaves out).
command -v gcc >/dev/null || missing+=(gcc)
[ -e /usr/include/stdlib.h ] || missing+=(libc6-dev)
command -v curl >/dev/null || missing+=(curl)
command -v chromium >/dev/null || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
# The cluster tests cut links between nodes with iptables (as root).
command -v iptables >/dev/null || missing+=(iptables)
if ((${#missing[@]})); then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "== installing ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "== gofmt"
# Two steps: inside one $(...) a failed git ls-files (no git, or a copy
# without .git) left gofmt with no arguments, reading an empty standard
# input, and the check passed without looking at a file.
gofiles=$(git ls-files '*.go')
[ -n "$gofiles" ] || { echo "git ls-files found no Go file"; exit 1; }
unformatted=$(gofmt -l $gofiles)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

# go test's default -timeout (10 m per package) is a hang guard that a
# loaded 2-core machine runs into: ./web took over 10 m at a load average
# of 25 (its browser and Node tests at 5 m). Every test bounds its own
# waits; CI's limit bounds the run.
if [ "$(id -u)" != 0 ]; then
	echo "== not root: cmd/baton's TestDataDirOfAnotherUserIsAUsageError will SKIP (it starts a node as user nobody); run as root for the whole suite"
fi
echo "== go test -race (all packages but the cluster)"
go test -race -count=1 -timeout 30m $(go list ./... | grep -v '/cluster$')

echo "== go test ./wal ./native without -race (the log's raw pwrite and the native socket's raw reads and writes on Linux: the race detector builds take the ordinary calls; and native at full speed, where its server outruns a client's reads)"
go test -count=1 -timeout 30m ./wal/ ./native/

echo "== go test -race ./cluster (real baton processes, kill -9, SIGSTOP, cut links)"
go test -race -count=1 -timeout 45m -p 1 -v ./cluster

echo "== fuzzing (bounded)"
scripts/fuzz.sh

echo "== docker compose cluster: kill the active, see the failover"
scripts/compose-failover.sh
