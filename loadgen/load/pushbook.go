package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"
)

// Headers of a push delivery (issue #30): receivers deduplicate by task and
// revision.
const (
	pushRevisionHeader = "A2A-Task-Revision"
	pushTokenHeader    = "A2A-Notification-Token"
	pushContentType    = "application/a2a+json"
	maxPushBody        = 8 << 20
)

// Delivery outcomes, as counted in PushStats and the
// a2astore_loadgen_push_deliveries_total metric.
const (
	pushOK        = "ok"
	pushDuplicate = "duplicate"
	pushOrder     = "order"
	pushMalformed = "malformed"
)

// PushStats is what the push receiver saw (Config.PushReceiver).
type PushStats struct {
	URL        string `json:"url"`                // the webhook the tasks were created with
	Receiver   string `json:"receiver,omitempty"` // the built-in receiver's URL; "" = none, nothing checked
	Deliveries int64  `json:"deliveries"`         // POSTs received, every outcome
	Duplicates int64  `json:"duplicates"`         // a (task, revision) received before
	// OrderViolations: a revision received after a higher one of its task
	// (and not itself received before).
	OrderViolations int64 `json:"order_violations"`
	// Malformed: no or a bad revision header, content type, token or body.
	Malformed int64 `json:"malformed"`
	Tasks     int   `json:"tasks"`         // tasks with at least one delivery
	Terminal  int   `json:"terminal_seen"` // tasks loadgen saw reach a terminal state
	// Losses: tasks loadgen saw terminal whose terminal event did not
	// arrive within the grace period after the run (Config.PushGrace).
	Losses      int64    `json:"losses"`
	LostTasks   []string `json:"lost_tasks,omitempty"` // the first 100
	Problems    []string `json:"problems,omitempty"`   // the first 100 order violations and malformed deliveries
	DownWindows int      `json:"down_windows"`         // times the receiver refused connections
	DownSec     float64  `json:"down_sec"`             // their total length
	GraceSec    float64  `json:"grace_sec"`            // waited after the run for terminal events
	// TerminalLagP50Ms and TerminalLagP99Ms: from the moment loadgen saw
	// a task terminal (its SendMessage's answer, a GetTask) to its
	// terminal event's arrival, over the tasks whose terminal event
	// arrived (0 for one that arrived first): the webhook's delivery
	// latency as the client sees it (push-soak.sh's hostile mix reports
	// the healthy owner's).
	TerminalLagP50Ms float64 `json:"terminal_lag_p50_ms"`
	TerminalLagP99Ms float64 `json:"terminal_lag_p99_ms"`
}

// violations is the count of deliveries and losses that fail the run.
func (s *PushStats) violations() int64 { return s.OrderViolations + s.Malformed + s.Losses }

// delivery is one POST as the book records it.
type delivery struct {
	task     a2a.TaskID
	revision int64
	terminal bool // the event carries a terminal task state
}

// pushTask is the book's view of one task.
type pushTask struct {
	revs        map[int64]struct{} // revisions received
	max         int64
	delivered   bool // its terminal event arrived
	seenFinal   bool // loadgen saw the task in a terminal state
	terminalRev int64
	sawAt       time.Time // when loadgen first saw it terminal
}

// pushBook records deliveries by task and checks them: revision order,
// duplicates and, at the end, losses. Safe for concurrent use.
type pushBook struct {
	token   string                 // expected A2A-Notification-Token, "" = unchecked
	counter *prometheus.CounterVec // by outcome; nil = none
	notify  chan struct{}          // a terminal event arrived (buffered 1)
	now     func() time.Time       // the clock of the terminal lag
	mu      struct {
		sync.Mutex
		tasks map[a2a.TaskID]*pushTask
		stats PushStats
		lag   *hdrhistogram.Histogram // terminal lags (PushStats.TerminalLagP50Ms)
	}
}

func newPushBook(token string, counter *prometheus.CounterVec) *pushBook {
	b := &pushBook{token: token, counter: counter, notify: make(chan struct{}, 1), now: time.Now}
	b.mu.tasks = map[a2a.TaskID]*pushTask{}
	b.mu.lag = newHist()
	return b
}

// taskLocked returns id's entry, creating it.
// REQUIRES: b.mu held.
func (b *pushBook) taskLocked(id a2a.TaskID) *pushTask {
	t := b.mu.tasks[id]
	if t == nil {
		t = &pushTask{revs: map[int64]struct{}{}}
		b.mu.tasks[id] = t
	}
	return t
}

// record books one well-formed delivery and returns its outcome.
func (b *pushBook) record(d delivery) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.taskLocked(d.task)
	outcome := pushOK
	switch _, dup := t.revs[d.revision]; {
	case dup:
		outcome = pushDuplicate
		b.mu.stats.Duplicates++
	case d.revision < t.max:
		outcome = pushOrder
		b.mu.stats.OrderViolations++
		b.problemLocked("order: task %s revision %d after revision %d", d.task, d.revision, t.max)
	}
	if len(t.revs) == 0 {
		b.mu.stats.Tasks++
	}
	t.revs[d.revision] = struct{}{}
	t.max = max(t.max, d.revision)
	if d.terminal && !t.delivered {
		t.delivered, t.terminalRev = true, d.revision
		if t.seenFinal {
			_ = b.mu.lag.RecordValue(clampHist(b.now().Sub(t.sawAt)))
		}
		select {
		case b.notify <- struct{}{}:
		default:
		}
	}
	b.mu.stats.Deliveries++
	b.count(outcome)
	return outcome
}

// malformed books a delivery that breaks the push contract.
func (b *pushBook) malformed(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.stats.Deliveries++
	b.mu.stats.Malformed++
	b.problemLocked("malformed: %v", err)
	b.count(pushMalformed)
}

// REQUIRES: b.mu held.
func (b *pushBook) problemLocked(format string, args ...any) {
	if len(b.mu.stats.Problems) < maxViolations {
		b.mu.stats.Problems = append(b.mu.stats.Problems, fmt.Sprintf(format, args...))
	}
}

func (b *pushBook) count(outcome string) {
	if b.counter != nil {
		b.counter.WithLabelValues(outcome).Inc()
	}
}

// sawState records a task state loadgen read from the server (a
// SendMessage, GetTask or CancelTask result).
func (b *pushBook) sawState(id a2a.TaskID, s a2a.TaskState) {
	if !s.Terminal() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.taskLocked(id)
	if !t.seenFinal {
		t.seenFinal, t.sawAt = true, b.now()
		b.mu.stats.Terminal++
		if t.delivered { // its terminal event came first
			_ = b.mu.lag.RecordValue(histMin)
		}
	}
}

// missing returns the tasks loadgen saw terminal whose terminal event has
// not arrived, at most limit of them (limit < 0: all), and their number.
func (b *pushBook) missing(limit int) ([]string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	n := 0
	for id, t := range b.mu.tasks {
		if t.seenFinal && !t.delivered {
			n++
			if limit < 0 || len(ids) < limit {
				ids = append(ids, string(id))
			}
		}
	}
	return ids, n
}

// await waits until every task seen terminal has had its terminal event
// delivered, grace has passed (after's channel fires) or ctx ends.
func (b *pushBook) await(ctx context.Context, grace time.Duration, after func(time.Duration) <-chan time.Time) {
	if _, n := b.missing(0); n == 0 || grace <= 0 {
		return
	}
	expired := after(grace)
	for {
		select {
		case <-b.notify:
			if _, n := b.missing(0); n == 0 {
				return
			}
		case <-expired:
			return
		case <-ctx.Done():
			return
		}
	}
}

// stats returns the counts, with the losses as of now.
func (b *pushBook) stats() PushStats {
	lost, n := b.missing(maxViolations)
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.mu.stats
	s.Problems = append([]string(nil), s.Problems...)
	s.Losses, s.LostTasks = int64(n), lost
	if b.mu.lag.TotalCount() > 0 {
		s.TerminalLagP50Ms = float64(b.mu.lag.ValueAtQuantile(50)) / 1e6
		s.TerminalLagP99Ms = float64(b.mu.lag.ValueAtQuantile(99)) / 1e6
	}
	return s
}

// ServeHTTP books one POST: 204 for a well-formed delivery (duplicates and
// order violations included: the sender must not retry them), 400 for a
// malformed one.
func (b *pushBook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, err := b.parse(r)
	if err != nil {
		b.malformed(err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.record(d)
	w.WriteHeader(http.StatusNoContent)
}

// Errors of a malformed delivery.
var (
	errPushMethod   = errors.New("not a POST")
	errPushRevision = errors.New("no positive " + pushRevisionHeader)
	errPushType     = errors.New("content type is not " + pushContentType)
	errPushToken    = errors.New("wrong " + pushTokenHeader)
	errPushEvent    = errors.New("body is not a task, status update or artifact update")
)

// parse checks one POST against the push contract and decodes it.
func (b *pushBook) parse(r *http.Request) (delivery, error) {
	if r.Method != http.MethodPost {
		return delivery{}, errPushMethod
	}
	rev, err := strconv.ParseInt(r.Header.Get(pushRevisionHeader), 10, 64)
	if err != nil || rev <= 0 {
		return delivery{}, fmt.Errorf("%w: %q", errPushRevision, r.Header.Get(pushRevisionHeader))
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != pushContentType {
		return delivery{}, fmt.Errorf("%w: %q", errPushType, r.Header.Get("Content-Type"))
	}
	if b.token != "" && r.Header.Get(pushTokenHeader) != b.token {
		return delivery{}, errPushToken
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPushBody))
	if err != nil {
		return delivery{}, fmt.Errorf("body: %w", err)
	}
	d, err := decodeDelivery(body)
	d.revision = rev
	return d, err
}

// decodeDelivery reads the task and whether its state is terminal from a
// StreamResponse body.
func decodeDelivery(body []byte) (delivery, error) {
	var sr a2a.StreamResponse
	if err := sr.UnmarshalJSON(body); err != nil {
		return delivery{}, fmt.Errorf("%w: %v", errPushEvent, err)
	}
	var d delivery
	switch ev := sr.Event.(type) {
	case *a2a.Task:
		d = delivery{task: ev.ID, terminal: ev.Status.State.Terminal()}
	case *a2a.TaskStatusUpdateEvent:
		d = delivery{task: ev.TaskID, terminal: ev.Status.State.Terminal()}
	case *a2a.TaskArtifactUpdateEvent:
		d = delivery{task: ev.TaskID}
	default:
		return delivery{}, fmt.Errorf("%w: %T", errPushEvent, sr.Event)
	}
	if d.task == "" {
		return delivery{}, fmt.Errorf("%w: no task ID", errPushEvent)
	}
	return d, nil
}
