// Package fakeclock is a clock tests drive, for background services that
// wait (engine/retention's Clock): After registers a waiter that fires when
// Advance passes its time, and WaitFor blocks — on a condition, never a
// sleep — until the service waits for a given duration, so a test knows
// the service reached that point.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

// New returns a clock reading start.
func New(start time.Time) *Clock {
	c := &Clock{now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the current reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Micros is Now in µs since the Unix epoch: an engine.Clock reading the
// same time, for the store under the service.
func (c *Clock) Micros() int64 { return c.Now().UnixMicro() }

// After returns a channel that receives once Advance reaches d from now.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), d, ch})
	c.cond.Broadcast()
	return ch
}

// Advance moves the clock by d and fires the waiters it passes.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
		} else {
			w.ch <- c.now
		}
	}
	c.waiters = kept
}

// WaitFor blocks until a waiter of duration d is pending.
func (c *Clock) WaitFor(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for _, w := range c.waiters {
			if w.d == d {
				return
			}
		}
		c.cond.Wait()
	}
}
