#!/bin/sh
# Regenerates the OpenAPI document openapi/swagger.json from the swag
# annotations on the handlers (package handlers; types from package api).
#
#   scripts/openapi.sh            write openapi/swagger.json
#   scripts/openapi.sh DIR        write DIR/swagger.json instead (the
#                                 staleness test openapi.TestDocumentIsCurrent
#                                 does this and compares)
#
# swag is pinned here, and only here; `go run pkg@version` fetches it once
# into the module cache and works offline from there.
set -eu
SWAG_VERSION=v1.16.6
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-"$root/openapi"}
cd "$root"
GOFLAGS=-mod=mod go run "github.com/swaggo/swag/cmd/swag@$SWAG_VERSION" init \
	--quiet \
	--generalInfo openapi.go \
	--dir ./handlers,./api \
	--outputTypes json \
	--output "$out" \
	--parseGoList=false
