package engine

// Held returns the number of keys held now, by one holder or more (on a
// standby: as replicated).
func (e *Engine) Held() int { return int(e.held.Load()) }
