package pgstore

// RouteReads makes every routed Get and List of s run on standby f()
// (-1: the primary), whatever the health monitor found; nil routes by
// health again.
func (s *Store) RouteReads(f func() int) {
	if f == nil {
		s.replicas.route.Store(nil)
		return
	}
	s.replicas.route.Store(&f)
}

// SetGates turns the read gates on (the default) or off: off, a standby
// serves whatever it has replayed and the primary whatever its snapshot
// shows — the mechanism's absence, for the tests that show it matters.
func (s *Store) SetGates(on bool) { s.replicas.gateOff.Store(!on) }

// SetPositionSQL replaces the query of the primary's WAL position a
// routed read starts with ("" restores pg_current_wal_insert_lsn()).
func (s *Store) SetPositionSQL(sql string) {
	if sql == "" {
		sql = positionSQL
	}
	s.replicas.positionSQL.Store(&sql)
}

// SetNudges turns the WAL flush nudges of waiting standby reads on (the
// default) or off.
func (s *Store) SetNudges(on bool) { s.replicas.nudgeOff.Store(!on) }

// SetGateHold makes every gate (on a standby or the primary) first wait
// for advisory lock key (taken shared), after its transaction's snapshot
// is taken and before it looks; 0 turns it off. A test holding the lock
// exclusively on a server stops gated reads there at that point.
func (s *Store) SetGateHold(key int64) { s.replicas.hold.Store(key) }
