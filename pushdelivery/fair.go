package pushdelivery

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Fair scheduling (SPEC N4): no owner can delay another owner's
// deliveries by more than one client timeout, whatever its webhooks do.
//
//   - Per owner: the deliveries in flight of one owner's tasks (of one
//     task, for a task without owner) are at most Options.PerOwner,
//     fewer than Options.Workers: whatever that owner's webhooks do, a
//     slot stays free for the others, and another owner's due record is
//     claimed at once.
//   - Fewest in flight first: each claim first passes over the tasks of
//     every owner with a delivery in flight and the destinations that
//     have failed; only when nothing else is due does it take more of an
//     owner's records, or a failing destination's.
//   - Per claim: a post after a claim's first runs only within one
//     client timeout of the claim (cut off there, it is tried again at
//     the next claim, not counted as the webhook's failure), so a claim
//     holds its slot for one client timeout of posting at most, plus its
//     log read and commit: when every slot is taken (several owners
//     busy), the first to free goes to an owner with nothing in flight.
//   - Per destination, a circuit breaker: a destination that times out,
//     or fails breakerFailures times in a row, is set aside (its records
//     are not claimed) for a cool-down, MinBackoff doubling per failed
//     probe up to MaxBackoff; then one delivery at a time probes it
//     (half-open), and a 2xx closes the breaker and makes the
//     destination's waiting records due at once (recovery in seconds, not
//     after each record's backoff).
//   - A destination set aside for longer than Options.Deadline since its
//     failures began: its records are drained — claimed after the owners
//     with nothing in flight, whatever their own owner has in flight
//     (Drainer; on an outbox without it, once nothing else is due and
//     within the owner's limit) — and their entries logged more than the
//     deadline ago dropped unsent (counted as dropped, with the
//     destination's last failure as the reason); a younger entry waits
//     until it is that old, or until a probe finds the destination back.
//     A drain posts nothing, so it takes no owner's slot. Without it a
//     set-aside destination's records never reached their deadline (they
//     were never claimed), nor did those of an owner whose slow webhooks
//     hold its slots, and the queue grew with every task created for
//     them.
//
// Hence the bound: an owner's due record waits for a free slot at most
// one client timeout (plus a log read and a commit) when other owners
// hold every slot, and not at all for any single other owner.

// breakerFailures is how many failures in a row, other than a timeout,
// open a destination's breaker.
const breakerFailures = 3

// maxBreakers and maxOwnerCache bound the worker's memory of failing
// destinations and of task owners (a variable for tests).
const maxBreakers = 1 << 14

var maxOwnerCache = 1 << 14

// ownerTimeout bounds the read of a task's owner at its first claim (a
// store that does not answer: the task counts as its own owner then).
const ownerTimeout = time.Second

// maxClaimTries bounds the claims of one round that are given back (an
// owner found at its limit once its task's owner was read).
const maxClaimTries = 8

// breaker is the state of a failing destination.
type breaker struct {
	since     time.Time     // when the failures began
	reason    string        // the last failure's (classify)
	fails     int           // failures in a row
	openUntil time.Time     // zero: not opened yet; after it, half-open
	cool      time.Duration // the last cool-down
}

// ownerKey is the fairness key of a task: its owner, or the task itself
// when it has none (or its owner cannot be read).
func ownerKey(task a2a.TaskID, owner string) string {
	if owner != "" {
		return "o:" + owner
	}
	return "t:" + string(task)
}

// key returns task's fairness key, reading its owner from the store the
// first time.
func (w *Worker) key(ctx context.Context, task a2a.TaskID) string {
	w.mu.Lock()
	k, ok := w.mu.owners[task]
	w.mu.Unlock()
	if ok {
		return k
	}
	gctx, cancel := context.WithTimeout(ctx, ownerTimeout)
	r, err := w.o.Store.Get(gctx, task)
	cancel()
	if err != nil {
		return ownerKey(task, "")
	}
	k = ownerKey(task, r.Owner)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mu.owners) >= maxOwnerCache {
		clear(w.mu.owners)
		clear(w.mu.byKey)
	}
	w.mu.owners[task] = k
	if w.mu.byKey[k] == nil {
		w.mu.byKey[k] = map[a2a.TaskID]struct{}{}
	}
	w.mu.byKey[k][task] = struct{}{}
	return k
}

// skips returns what a claim at now passes over: the destinations at
// their limit, set aside, or probed already, and the tasks of the owners
// at their limit; fair: also the failing destinations and the tasks of
// every owner with a delivery in flight.
func (w *Worker) skips(now time.Time, fair bool) (busy []string, tasks []a2a.TaskID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for d, n := range w.mu.dests {
		if n >= w.o.PerDest {
			busy = append(busy, d)
		}
	}
	for d, b := range w.mu.breakers {
		switch {
		case fair: // failing
		case w.expired(b, now): // set aside past the deadline: claimed to drop
			continue
		case now.Before(b.openUntil): // set aside
		case !b.openUntil.IsZero() && w.mu.dests[d] > 0: // half-open: one probe at a time
		default:
			continue
		}
		busy = append(busy, d)
	}
	for k, n := range w.mu.keys {
		if fair && n > 0 || n >= w.o.PerOwner {
			for t := range w.mu.byKey[k] {
				tasks = append(tasks, t)
			}
		}
	}
	return busy, tasks
}

// admit counts a delivery of key to dest in flight, unless key is at its
// limit or dest is set aside (a task whose owner was not known when the
// claim passed its skips).
func (w *Worker) admit(key, dest string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.keys[key] >= w.o.PerOwner {
		return false
	}
	if b := w.mu.breakers[dest]; b != nil && !w.expired(b, now) && (now.Before(b.openUntil) || !b.openUntil.IsZero() && w.mu.dests[dest] > 0) {
		return false
	}
	w.mu.keys[key]++
	w.mu.dests[dest]++
	return true
}

// done ends a delivery admit counted.
func (w *Worker) done(key, dest string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.dests[dest]--; w.mu.dests[dest] == 0 {
		delete(w.mu.dests, dest)
	}
	if w.mu.keys[key]--; w.mu.keys[key] == 0 {
		delete(w.mu.keys, key)
	}
}

// observe records the outcome of a post to dest in its breaker, and
// reports whether it was a 2xx after failures (the destination is back).
func (w *Worker) observe(dest, reason string) bool {
	now := w.o.Clock()
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.mu.breakers[dest]
	if reason == ReasonDelivered {
		delete(w.mu.breakers, dest)
		return b != nil
	}
	if b == nil {
		if len(w.mu.breakers) >= maxBreakers {
			return false
		}
		b = &breaker{since: now}
		w.mu.breakers[dest] = b
	}
	b.fails++
	b.reason = reason
	if reason == ReasonTimeout || b.fails >= breakerFailures || !b.openUntil.IsZero() {
		b.cool = min(max(2*b.cool, w.o.MinBackoff), w.o.MaxBackoff)
		b.openUntil = now.Add(b.cool)
	}
	return false
}

// expired reports whether b's destination is set aside at now and has
// been failing for the deadline: its records' entries are dropped unsent
// (w.mu held).
func (w *Worker) expired(b *breaker, now time.Time) bool {
	return now.Before(b.openUntil) && now.Sub(b.since) >= w.o.Deadline
}

// expiredDests returns the destinations set aside past the deadline at
// now (expired), whose records a drain claims.
func (w *Worker) expiredDests(now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var dests []string
	for d, b := range w.mu.breakers {
		if w.expired(b, now) {
			dests = append(dests, d)
		}
	}
	return dests
}

// setAside returns when dest's failures began and the last one's reason
// if dest is set aside past the deadline (expired).
func (w *Worker) setAside(dest string) (since time.Time, reason string, ok bool) {
	now := w.o.Clock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.mu.breakers[dest]; b != nil && w.expired(b, now) {
		return b.since, b.reason, true
	}
	return time.Time{}, "", false
}

// Recoverer is implemented by an Outbox that can make a destination's
// waiting records due at once: the worker calls DueNow when a
// destination that had failed answers 2xx again, so that its backlog
// goes out now rather than after each record's backoff.
type Recoverer interface {
	// DueNow sets NextAt to now on the records to dest that are behind
	// their task and wait for a later NextAt; it returns how many.
	DueNow(ctx context.Context, dest string, now time.Time) (int, error)
}

// recovered makes dest's waiting records due (when the outbox can) and
// wakes the claim loop.
func (w *Worker) recovered(ctx context.Context, dest string) {
	if r, ok := w.o.Outbox.(Recoverer); ok {
		rctx, cancel := detached(ctx)
		defer cancel()
		if _, err := r.DueNow(rctx, dest, w.o.Clock()); err != nil {
			w.o.Logger.Warn("pushdelivery: make a recovered destination's records due", "host", host(dest), "err", err)
		}
	}
	w.poke()
}
