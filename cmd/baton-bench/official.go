package main

import "errors"

// officialLocker drives the official Go client (package api).
type officialLocker struct{}

// newOfficialSet builds the official clients of one run.
func newOfficialSet(addr string, cfg *config, clients int) (lockerSet, error) {
	return nil, errors.New("--client official: the official client (api.Client) is not in this tree yet")
}
