package retention

import "time"

// Clock is the service's time: Now for the age cutoff, After for the
// interval and the pause. Tests inject a clock they drive; the default is
// the wall clock. Its Now must agree with the store's clock (the storage
// update times it compares against).
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
