package pushdelivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Headers of a push notification besides Content-Type and Authorization.
const (
	// HeaderToken carries the configuration's token (A2A §13).
	HeaderToken = "A2A-Notification-Token"
	// HeaderRevision carries the task revision of the notification:
	// receivers deduplicate by task and revision, since delivery is at
	// least once.
	HeaderRevision = "A2A-Task-Revision"
	// ContentType is the media type of the StreamResponse posted.
	ContentType = "application/a2a+json"
)

// maxDrain bounds the response body read, whatever the client.
const maxDrain = 64 << 10

// commitTimeout bounds a delivery's commit, and the release of a claim
// returned too late to post: each runs under its own context (detached
// from the worker's, so that Close does not cancel it), which ends
// within the lease's margin (postBy).
const commitTimeout = 5 * time.Second

// detached returns a context for a commit or a release: ctx's values,
// not its cancellation, and commitTimeout.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
}

// errPostBy is the cause of a delivery cut off at its lease's post-by
// time.
var errPostBy = errors.New("pushdelivery: lease ending")

// errWindow is the cause of a post after a claim's first cut off one
// client timeout after the claim (fair.go): not the webhook's failure.
var errWindow = errors.New("pushdelivery: claim's window over")

// postBy is when a claim's posts must end: before the lease ends (until)
// by commitTimeout or a fifth of the lease, the shorter, so that the
// commit that follows lands within the lease (unless, with a lease under
// 25 s, the commit takes longer than that fifth).
func postBy(claimed, until time.Time) time.Time {
	return until.Add(-min(commitTimeout, until.Sub(claimed)/5))
}

// deliver delivers the entries of the claimed record after its cursor, in
// log order, stopping at the first failure, and commits the new cursor.
// A delivery that Close cancels commits what it delivered before.
// d.claimed is the time of the claim, from which ClaimBudget runs.
//
// No post outlives the lease (SPEC N2): past it another worker may claim
// the record and post the same entries. A claim that returned past its
// post-by time (it stalled: a pause, a slow outbox) posts nothing and
// gives the record back; otherwise the delivery runs under a context
// that ends at that time. A post it cuts off is a timeout, like one the
// client's Timeout ends; a read it cuts off, a store failure. The commit
// runs under its own context, within the lease's margin.
func (w *Worker) deliver(ctx context.Context, l Lease, d delivery) {
	rec := *l.Record()
	left := postBy(d.claimed, l.Until()).Sub(w.o.Clock())
	if left <= 0 {
		w.o.Metrics.lostLease()
		w.o.Logger.Warn("pushdelivery: claim returned too late to post within its lease; claimed again later",
			"task", rec.TaskID, "config", rec.Config.ID, "late", -left)
		rctx, cancel := detached(ctx)
		defer cancel()
		l.Release(rctx) // even after Close: the record need not wait out the lease
		return
	}
	dctx, cancel := context.WithTimeoutCause(ctx, left, errPostBy)
	defer cancel()
	wctx := dctx // the posts after the first: within one client timeout of the claim (N4)
	if t := w.o.Client.Timeout; t > 0 {
		var wcancel context.CancelFunc
		wctx, wcancel = context.WithTimeoutCause(dctx, t, errWindow)
		defer wcancel()
	}
	err := w.send(dctx, wctx, l.Revision(), &rec, d)
	if errors.Is(err, errStale) {
		w.drop(ctx, l, &rec)
		return
	}
	if err != nil && ctx.Err() == nil {
		// The store failed, not the webhook: no attempt counted.
		w.o.Logger.Warn("pushdelivery: read task", "task", rec.TaskID, "err", err)
		rec.NextAt = w.o.Clock().Add(w.o.MinBackoff)
	}
	cctx, ccancel := detached(ctx)
	defer ccancel()
	switch err := w.commit(cctx, l, &rec); {
	case errors.Is(err, ErrLeaseLost):
		w.o.Metrics.lostLease()
		w.o.Logger.Debug("pushdelivery: lease lost", "task", rec.TaskID, "config", rec.Config.ID)
	case err != nil:
		w.o.Logger.Warn("pushdelivery: commit", "task", rec.TaskID, "config", rec.Config.ID, "err", err)
	}
}

// delivery is how a record was claimed: at claimed, and drain when as a
// record of a destination set aside past the deadline, outside its
// owner's limit (Worker.next): such a delivery drops the entries past
// the deadline and posts nothing.
type delivery struct {
	claimed time.Time
	drain   bool
}

// errStale is send's error for a record whose task was deleted since
// its configuration was saved (SPEC N1).
var errStale = errors.New("pushdelivery: the task of the push config was deleted")

// drop deletes the claimed record rec of a deleted incarnation of its
// task, unsent (SPEC N1); a lease that cannot drop is released.
func (w *Worker) drop(ctx context.Context, l Lease, rec *Record) {
	cctx, cancel := detached(ctx)
	defer cancel()
	d, ok := l.(dropper)
	if !ok {
		l.Release(cctx)
		return
	}
	if err := d.Drop(cctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		w.o.Logger.Warn("pushdelivery: drop the push config of a deleted task", "task", rec.TaskID, "config", rec.Config.ID, "err", err)
		return
	}
	w.o.Logger.Debug("pushdelivery: push config of a deleted task dropped", "task", rec.TaskID, "config", rec.Config.ID)
}

// checkLive fails with errStale when the store remembers a deletion of
// rec's task after rec's configuration was saved. Called after the read
// of what is to be sent: marks only grow, so a read that came before a
// mark showing no deletion read the incarnation rec was saved for.
func (w *Worker) checkLive(ctx context.Context, rec *Record) error {
	mark, err := w.o.Store.Deleted(ctx, rec.TaskID)
	if err = late(ctx, err); err != nil {
		return fmt.Errorf("read task deletions: %w", err)
	}
	if rec.stale(mark) {
		return errStale
	}
	return nil
}

// send delivers rec's log entries after rec.Delivered (at most a batch),
// updating rec; head is the task's revision at claim time. The first
// post runs under ctx, the others under wctx.
func (w *Worker) send(ctx, wctx context.Context, head int64, rec *Record, d delivery) error {
	entries, err := w.o.Store.ReadLog(ctx, rec.TaskID, rec.Delivered, w.o.Batch)
	if err = late(ctx, err); err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	if err := w.checkLive(ctx, rec); err != nil {
		return err
	}
	if len(entries) == 0 && head > rec.Delivered || len(entries) > 0 && entries[0].Revision > rec.Delivered+1 {
		return w.sendTask(ctx, rec, d) // trimmed: the entries after the cursor are gone
	}
	// The read reached the log's last entry (at claim time at least).
	end := len(entries) < w.o.Batch || len(entries) > 0 && entries[len(entries)-1].Revision >= head
	for i := range entries {
		if i > 0 {
			ctx = wctx
		}
		if i > 0 && w.o.Clock().Sub(d.claimed) >= w.o.ClaimBudget || ctx.Err() != nil {
			// The rest in the next claim, within its lease: past the
			// post-by time a post would fail at once and, for a webhook
			// failing past the deadline, be dropped unsent.
			return nil
		}
		e := &entries[i]
		payload, err := e.Payload(rec.TaskID)
		if err != nil { // undecodable: it will never deliver
			w.o.Logger.Error("pushdelivery: log entry passed over", "task", rec.TaskID, "revision", e.Revision, "err", err)
			payload = nil
		}
		last := end && i == len(entries)-1 // a terminal entry with more after it is not the end
		if !w.step(ctx, rec, d, e.Revision, e.Trace, payload, e.Time, last && e.State.Terminal()) {
			return nil
		}
	}
	return nil
}

// late is err, or the cause of ctx's end when a read that succeeded used
// the delivery's whole window (a store that does not heed ctx): either
// way a store failure, with its backoff. Posting then would fail at once
// and count against the webhook.
func late(ctx context.Context, err error) error {
	if err == nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// sendTask delivers the task itself at its current revision, for a log
// trimmed past rec's cursor.
func (w *Worker) sendTask(ctx context.Context, rec *Record, d delivery) error {
	r, err := w.o.Store.Get(ctx, rec.TaskID)
	if err = late(ctx, err); err != nil {
		return fmt.Errorf("get task: %w", err)
	}
	if err := w.checkLive(ctx, rec); err != nil {
		return err
	}
	payload, err := json.Marshal(a2a.StreamResponse{Event: r.Task})
	if err != nil {
		return fmt.Errorf("encode task: %w", err)
	}
	w.step(ctx, rec, d, r.Revision, "", payload, 0, r.Task.Status.State.Terminal())
	return nil
}

// step delivers one entry at revision rev, written under the traceparent
// written ("" when unknown, engine.LogEntry.Trace) (payload nil: nothing
// to send, it is passed over) committed at µs at (0: unknown); done: the entry is
// terminal and the log's last, so the record is Done past it. It reports whether the cursor moved past it (delivered,
// dropped or passed over); false stops the delivery there.
func (w *Worker) step(ctx context.Context, rec *Record, d delivery, rev int64, written string, payload []byte, at int64, done bool) bool {
	if payload != nil {
		switch w.entryFate(rec, at) {
		case entryWaits:
			return false
		case entryDropped:
			payload = nil
		case entryPosts:
			if d.drain { // a drain posts nothing: the rest for a claim within the limits
				rec.NextAt = w.o.Clock().Add(w.o.MinBackoff)
				return false
			}
		}
	}
	if payload != nil {
		status, err := w.post(ctx, rec, rev, written, payload)
		reason := classify(status, err)
		if ctx.Err() == nil || context.Cause(ctx) == errPostBy {
			if w.observe(rec.Dest, reason) { // the destination is back
				w.recovered(ctx, rec.Dest)
			}
		}
		switch {
		case reason == ReasonDelivered:
			now := w.o.Clock()
			latency := time.Duration(-1)
			if at > 0 {
				latency = now.Sub(time.UnixMicro(at))
			}
			w.o.Metrics.attempt(reason, OutcomeDelivered, latency)
			rec.Attempts, rec.FailingSince, rec.LastError = 0, time.Time{}, ""
		case ctx.Err() != nil && context.Cause(ctx) != errPostBy: // Close canceled it: not the webhook's failure
			return false
		case !w.fail(rec, reason, status):
			return false
		}
	}
	// NextAt = now: among due records, the one served longest ago is
	// claimed first (with a zero time all would tie, and a busy task could
	// be taken again and again ahead of the others).
	rec.Delivered, rec.Done, rec.NextAt = rev, done, w.o.Clock()
	return true
}

// Outcomes of entryFate.
const (
	entryPosts = iota
	entryWaits
	entryDropped
)

// entryFate decides an entry committed at µs at (0: unknown) for rec:
// one older than the deadline is dropped unsent and counted — as its
// set-aside destination's failure when rec's destination is set aside
// past the deadline (fair.go), otherwise as expired (ReasonExpired: a
// destination too slow for its events, or a queue that waited) — so no
// event is posted later than the deadline after it was logged; a younger
// entry of a destination set aside past the deadline waits until it is
// that old (rec.NextAt), or until a probe finds the destination back
// (DueNow). Otherwise (or its age unknown) it posts.
func (w *Worker) entryFate(rec *Record, at int64) int {
	if at <= 0 {
		return entryPosts
	}
	now, old := w.o.Clock(), time.UnixMicro(at).Add(w.o.Deadline)
	since, reason, aside := w.setAside(rec.Dest)
	switch {
	case aside && now.Before(old):
		rec.NextAt = old
		return entryWaits
	case aside: // failing past the deadline since since
		if rec.FailingSince.IsZero() || since.Before(rec.FailingSince) {
			rec.FailingSince = since
		}
		rec.LastError = reason
	case now.Before(old):
		return entryPosts
	default:
		reason = ReasonExpired
	}
	w.o.Metrics.unsent(reason)
	w.o.Logger.Debug("pushdelivery: entry dropped unsent", "task", rec.TaskID, "config", rec.Config.ID,
		"host", host(rec.Dest), "reason", reason, "age", now.Sub(time.UnixMicro(at)))
	rec.Attempts = 0
	return entryDropped
}

// fail records a failed attempt of the entry after rec.Delivered: a
// retry after the backoff, or a drop when the webhook has been failing
// for the deadline (true: the caller moves the cursor past the entry).
// FailingSince is when the webhook's current run of failures began, and a
// drop keeps it: the next entry of a webhook down past the deadline is
// tried once and dropped, rather than waiting a deadline of its own.
func (w *Worker) fail(rec *Record, reason string, status int) bool {
	now := w.o.Clock()
	rec.Attempts++
	if rec.FailingSince.IsZero() {
		rec.FailingSince = now
	}
	rec.LastError = reason
	if status != 0 {
		rec.LastError = reason + " (" + strconv.Itoa(status) + ")"
	}
	w.o.Logger.Debug("pushdelivery: attempt failed", "task", rec.TaskID, "config", rec.Config.ID,
		"host", host(rec.Dest), "reason", rec.LastError, "attempts", rec.Attempts)
	if now.Sub(rec.FailingSince) >= w.o.Deadline {
		w.o.Metrics.attempt(reason, OutcomeDropped, 0)
		rec.Attempts = 0
		return true
	}
	w.o.Metrics.attempt(reason, OutcomeFailed, 0)
	rec.NextAt = now.Add(w.backoff(rec.Attempts))
	return false
}

// post sends one notification of the entry at revision rev, written
// under the traceparent written, and returns the response's status. With
// Options.Tracer it is a span, whose traceparent the request carries
// (trace.go).
func (w *Worker) post(ctx context.Context, rec *Record, rev int64, written string, payload []byte) (status int, err error) {
	ctx, span := w.startAttempt(ctx, rec, rev, written)
	defer func() { endAttempt(span, status, err) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.Config.URL, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", ContentType)
	if rec.Config.Token != "" {
		req.Header.Set(HeaderToken, rec.Config.Token)
	}
	if a := rec.Config.Auth; a != nil && a.Credentials != "" {
		req.Header.Set("Authorization", strings.TrimSpace(a.Scheme+" "+a.Credentials))
	}
	req.Header.Set(HeaderRevision, strconv.FormatInt(rev, 10))
	w.injectTrace(ctx, req.Header)
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// host is the host of a destination, the most a log line says of it.
func host(dest string) string {
	u, err := url.Parse(dest)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// commitRetry is the wait between the tries of a failed commit.
const commitRetry = 100 * time.Millisecond

// commit commits rec, trying again after a failure (a connection lost, a
// serialization failure) until ctx ends: a delivery acknowledged by its
// webhook is repeated only when its lease is lost, not because one
// commit failed (SPEC N2). A commit that still fails leaves the lease to
// expire.
func (w *Worker) commit(ctx context.Context, l Lease, rec *Record) error {
	for {
		err := l.Commit(ctx, rec)
		if err == nil || errors.Is(err, ErrLeaseLost) {
			return err
		}
		w.o.Logger.Warn("pushdelivery: commit failed, trying again", "task", rec.TaskID, "config", rec.Config.ID, "err", err)
		t := time.NewTimer(commitRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}
