package engine

// Held returns the number of locks held now (on a standby: as replicated).
// It visits every shard under its lock, so it costs O(keys): it is meant for
// metrics scrapes, not for hot paths.
func (e *Engine) Held() int {
	n := 0
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		for _, lk := range s.locks {
			if lk.token != 0 {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}
