package engine

// Held returns the number of locks held now (on a standby: as replicated).
func (e *Engine) Held() int { return int(e.held.Load()) }
