package engine

// SnapshotRecords passes the full state to emit as records in the log's
// format, shard by shard: for each key its holder (a RecGrant, with the
// claim deadline of a grant to a detached waiter) and its waiters in queue
// order (RecEnqueue, and RecDetach for one whose request went away), then every remembered waiter ID outcome (RecOutcome);
// the shard of the key "" begins with the token reservation (RecReserve)
// and the epoch (RecEpoch, if any).
// Right after a shard is dumped, with it still locked, done(shard) is
// called: the log's last index read there is the shard's dump index, since
// every record of the shard's keys is appended under the same lock. A
// restart replays (Replay) the dump, then each log record whose index is
// above its key's shard dump index (keys map to shards by the fixed
// keyHash). rec is the Engine's buffer, valid during the call only. emit
// and done run with a shard locked: they must not block for long or call
// into the Engine.
func (e *Engine) SnapshotRecords(emit func(shard int, rec []byte), done func(shard int)) {
	var buf []byte
	put := func(i int, r *Record) {
		buf = AppendRecord(buf[:0], r)
		emit(i, buf)
	}
	meta := e.ShardOf("")
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		now := e.now()
		if i == meta {
			// What has no key: the tokens reserved (no token above
			// Token was issued) and the epoch, appended under this
			// shard's lock like their records.
			put(i, &Record{Kind: RecReserve, Token: e.tokens.last.Load()})
			if ep := e.epoch.Load(); ep != nil {
				put(i, &Record{Kind: RecEpoch, Epoch: ep.Epoch, Owner: ep.By})
			}
		}
		for _, lk := range s.locks {
			limit, mode := recLimit(lk.limit()), lk.mode()
			lk.each(func(h *hold) {
				r := Record{Kind: RecGrant, Key: lk.key, Token: h.token, Lease: h.lease, At: now.wallAt(h.granted), Expires: now.wallAt(h.expires), Owner: lk.owner(h), Mode: mode, Limit: limit}
				if t := h.holder; t != nil {
					r.WaiterID, r.Until = t.id, now.wallAt(t.claimBy)
					r.Asked, r.LeaseDefaulted = t.askedRecord(e.cfg.LeaseDefault)
				}
				put(i, &r)
			})
			for w := lk.head; w != nil; w = w.next {
				r := Record{Kind: RecEnqueue, Key: lk.key, WaiterID: w.t.id, Lease: w.lease, At: now.wallAt(w.arrived), WaitUntil: now.wallAt(w.waitUntil), Owner: w.owner, Mode: w.mode, Limit: limit, LeaseDefaulted: w.defaulted}
				put(i, &r)
				if w.state == detached && w.graceUntil != 0 {
					put(i, &Record{Kind: RecDetach, Key: lk.key, WaiterID: w.t.id, At: now.wall, Until: now.wallAt(w.graceUntil)})
				}
			}
		}
		for _, t := range s.tickets {
			r := Record{Kind: RecOutcome, Key: t.key, WaiterID: t.id, Until: now.wallAt(t.dl.when), Mode: t.mode, Limit: recLimit(int(t.limit))}
			r.Asked, r.LeaseDefaulted = t.askedRecord(e.cfg.LeaseDefault)
			switch t.state {
			case tTimedOut:
				r.Outcome = OutcomeTimeout
			case tEnded:
				r.Outcome = OutcomeEnded
			case tForced:
				r.Outcome = OutcomeForced
			case tForceNotHeld:
				r.Outcome = OutcomeForceNotHeld
			default:
				continue
			}
			put(i, &r)
		}
		done(i)
		s.mu.Unlock()
	}
}

// ShardOf returns the shard that holds key's state: the shard whose
// records SnapshotRecords emits it with, and whose dump index decides
// whether a log record of key is replayed after the dump. It is fixed
// across processes for the same Config.Shards.
func (e *Engine) ShardOf(key string) int { return int(keyHash(key) & e.mask) }
