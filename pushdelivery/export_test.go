package pushdelivery

// SweepLooked returns how many tasks Sweep's look again went through, in
// all (the found list's entries it visited).
func (l *Local) SweepLooked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.looked
}

// SetMaxOwnerCache sets the worker's owner cache bound until the
// returned function restores it.
func SetMaxOwnerCache(n int) (restore func()) {
	old := maxOwnerCache
	maxOwnerCache = n
	return func() { maxOwnerCache = old }
}
