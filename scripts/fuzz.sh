#!/bin/sh
# Runs every fuzz target of the packages that parse client input (and the
# log's records and segment reader, which parse what is on the disk), each
# for a bounded time (FUZZTIME, default 10s). A failure leaves the crashing input
# in <package>/testdata/fuzz/<Target>/: commit it, and it runs as a
# regression test with every plain `go test`.
#
#   scripts/fuzz.sh                 all targets, 10s each
#   FUZZTIME=2m scripts/fuzz.sh     longer
set -eu
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
for pkg in ./handlers/ ./engine/ ./wal/ ./native/; do
	# A package that does not build (or is gone) listed no target in a
	# pipeline whose failure the loop ignored: the script passed, having
	# fuzzed nothing there.
	list=$(go test -list '^Fuzz' "$pkg") || { echo "$list"; echo "fuzz: go test -list failed for $pkg"; exit 1; }
	targets=$(printf '%s\n' "$list" | grep '^Fuzz' || true)
	[ -n "$targets" ] || { echo "fuzz: no fuzz target in $pkg"; exit 1; }
	for target in $targets; do
		echo "fuzz $pkg $target for $FUZZTIME"
		out=$(mktemp)
		if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime=2s -parallel=2 "$pkg" >"$out" 2>&1; then
			cat "$out"
			# The fuzzing engine sometimes reports its own deadline when
			# -fuzztime ends during a minimization; that is no finding (no
			# failing input was written): run the target once more.
			if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
				echo "fuzz $pkg $target: the engine's own deadline, not a finding; once more"
				go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime=2s -parallel=2 "$pkg" || { rm -f "$out"; exit 1; }
			else
				rm -f "$out"
				exit 1
			fi
		else
			tail -n 2 "$out"
		fi
		rm -f "$out"
	done
done
