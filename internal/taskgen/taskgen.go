// Package taskgen makes realistic, reproducible A2A tasks for benchmarks,
// load generation and tests: a few history messages and small artifacts per
// task, context IDs with a skewed (Zipf) distribution — some hot contexts
// and a long tail — and a clock that hands out many equal timestamps.
package taskgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Shape describes a data set. The zero value is valid: see the defaults.
type Shape struct {
	Contexts      int     // distinct context IDs; default 1000
	Skew          float64 // Zipf s parameter (>1); default 1.1
	History       int     // history messages per task; default 3
	Artifacts     int     // artifacts per task; default 1
	ArtifactBytes int     // text bytes per artifact; default 256
	Seed          uint64  // default 1
}

func (s Shape) withDefaults() Shape {
	if s.Contexts <= 0 {
		s.Contexts = 1000
	}
	if s.Skew <= 1 {
		s.Skew = 1.1
	}
	if s.History < 0 {
		s.History = 0
	} else if s.History == 0 {
		s.History = 3
	}
	if s.Artifacts == 0 {
		s.Artifacts = 1
	}
	if s.ArtifactBytes <= 0 {
		s.ArtifactBytes = 256
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	return s
}

// Gen produces tasks of a Shape. It is not safe for concurrent use.
type Gen struct {
	shape Shape
	rng   *rand.Rand
	zipf  *rand.Zipf
	text  string
}

// New returns a generator; the same Shape always yields the same tasks.
func New(shape Shape) *Gen {
	shape = shape.withDefaults()
	rng := rand.New(rand.NewPCG(shape.Seed, 0x7a5c))
	return &Gen{
		shape: shape,
		rng:   rng,
		zipf:  rand.NewZipf(rng, shape.Skew, 1, uint64(shape.Contexts-1)),
		text:  strings.Repeat("lorem ipsum dolor sit amet ", shape.ArtifactBytes/27+1)[:shape.ArtifactBytes],
	}
}

// ContextID returns the i-th context ID; 0 is the hottest.
func ContextID(i int) string { return fmt.Sprintf("ctx-%05d", i) }

// TaskID returns the i-th task ID.
func TaskID(i int) a2a.TaskID { return a2a.TaskID(fmt.Sprintf("task-%09d", i)) }

var states = []a2a.TaskState{
	a2a.TaskStateWorking, a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateCompleted,
	a2a.TaskStateCompleted, a2a.TaskStateSubmitted, a2a.TaskStateInputRequired, a2a.TaskStateFailed,
	a2a.TaskStateCanceled,
}

// Context draws a context index from the skewed distribution.
func (g *Gen) Context() int { return int(g.zipf.Uint64()) }

// Task returns the i-th task of the data set, with a context drawn from the
// skewed distribution and a status timestamp derived from i.
func (g *Gen) Task(i int) *a2a.Task {
	ctxID := ContextID(g.Context())
	ts := time.Unix(1_700_000_000+int64(i/10), 0).UTC()
	return g.Build(TaskID(i), ctxID, states[g.rng.IntN(len(states))], &ts, i)
}

// Build returns a task with the given ID, context, state and status
// timestamp (nil: none) and the generator's content: a status message, the
// Shape's history messages and artifacts; n numbers the messages' text.
// Tests and benchmarks that fix those fields use it; it draws nothing from
// the generator's random source.
func (g *Gen) Build(id a2a.TaskID, contextID string, state a2a.TaskState, ts *time.Time, n int) *a2a.Task {
	t := &a2a.Task{
		ID:        id,
		ContextID: contextID,
		Status: a2a.TaskStatus{
			State:     state,
			Timestamp: ts,
			Message:   &a2a.Message{ID: fmt.Sprintf("%s-status", id), Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewTextPart("working on it")}},
		},
	}
	for h := range g.shape.History {
		role := a2a.MessageRoleUser
		if h%2 == 1 {
			role = a2a.MessageRoleAgent
		}
		t.History = append(t.History, &a2a.Message{
			ID: fmt.Sprintf("%s-m%d", id, h), Role: role, ContextID: contextID, TaskID: id,
			Parts: a2a.ContentParts{a2a.NewTextPart(fmt.Sprintf("message %d of task %d", h, n))},
		})
	}
	for a := range g.shape.Artifacts {
		t.Artifacts = append(t.Artifacts, &a2a.Artifact{
			ID: a2a.ArtifactID(fmt.Sprintf("%s-a%d", id, a)), Name: "result",
			Parts: a2a.ContentParts{a2a.NewTextPart(g.text)},
		})
	}
	return t
}

// Message returns a new history message for task id.
func (g *Gen) Message(id a2a.TaskID, n int) *a2a.Message {
	return &a2a.Message{
		ID: fmt.Sprintf("%s-x%d", id, n), Role: a2a.MessageRoleUser, TaskID: id,
		Parts: a2a.ContentParts{a2a.NewTextPart("follow-up")},
	}
}

// StepClock is a clock (µs) that advances by one microsecond every Every
// readings, so runs of Every consecutive writes share a timestamp.
// It is safe for concurrent use.
type StepClock struct {
	Start, Every int64
	n            atomic.Int64
}

// Now returns the current reading and counts it.
func (c *StepClock) Now() int64 {
	return c.Start + (c.n.Add(1)-1)/max(c.Every, 1)
}
