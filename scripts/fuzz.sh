#!/bin/sh
# Runs every fuzz target of the packages that parse client input, each for a
# bounded time (FUZZTIME, default 10s). A failure leaves the crashing input
# in <package>/testdata/fuzz/<Target>/: commit it, and it runs as a
# regression test with every plain `go test`.
#
#   scripts/fuzz.sh                 all targets, 10s each
#   FUZZTIME=2m scripts/fuzz.sh     longer
set -eu
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
for pkg in ./handlers/; do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		echo "fuzz $pkg $target for $FUZZTIME"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" -parallel=2 "$pkg"
	done
done
