package main

import "context"

// failover measures the failover workload.
func (b *bench) failover(ctx context.Context) error {
	return errNeedsCluster
}
