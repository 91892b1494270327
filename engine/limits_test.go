package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1/pbconv"
	"google.golang.org/protobuf/proto"

	"github.com/a2astore/a2astore/engine"
)

// nested returns a JSON object nested depth levels deep ({"k":{"k":…1}}).
func nested(depth int) any {
	var v any = 1.0
	for range depth {
		v = map[string]any{"k": v}
	}
	return v
}

// nestedList returns a list nested depth levels deep ([[…[1]…]]).
func nestedList(depth int) any {
	var v any = 1.0
	for range depth {
		v = []any{v}
	}
	return v
}

func limitsTask() *a2a.Task {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	return &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts}}
}

// placements put a value at nesting depth 1 in every place a task can hold
// free-form JSON: task, message, artifact and part metadata, and data parts.
var placements = map[string]func(t *a2a.Task, v any){
	"task metadata": func(t *a2a.Task, v any) { t.Metadata = map[string]any{"v": v} },
	"history message metadata": func(t *a2a.Task, v any) {
		t.History = []*a2a.Message{{ID: "m", Role: a2a.MessageRoleUser, Metadata: map[string]any{"v": v}}}
	},
	"status message data part": func(t *a2a.Task, v any) {
		t.Status.Message = &a2a.Message{ID: "m", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"v": v})}}
	},
	"artifact metadata": func(t *a2a.Task, v any) {
		t.Artifacts = []*a2a.Artifact{{ID: "a", Metadata: map[string]any{"v": v}}}
	},
	"artifact part metadata": func(t *a2a.Task, v any) {
		p := a2a.NewTextPart("x")
		p.Metadata = map[string]any{"v": v}
		t.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{p}}}
	},
}

// TestLimitsDepth: content nested exactly MaxDepth levels is accepted
// anywhere; one level more is ErrLimitExceeded naming MaxDepth.
func TestLimitsDepth(t *testing.T) {
	var lim engine.Limits
	for name, place := range placements {
		for kind, build := range map[string]func(int) any{"object": nested, "list": nestedList} {
			ok := limitsTask()
			place(ok, build(engine.DefaultMaxDepth-1)) // the map holding it is one level
			if err := lim.ValidateTask(ok); err != nil {
				t.Errorf("%s, %s at depth %d: %v", name, kind, engine.DefaultMaxDepth, err)
			}
			if d := engine.TaskShape(ok).Depth; d != engine.DefaultMaxDepth {
				t.Errorf("%s, %s: TaskShape depth %d, want %d", name, kind, d, engine.DefaultMaxDepth)
			}
			deep := limitsTask()
			place(deep, build(engine.DefaultMaxDepth))
			err := lim.ValidateTask(deep)
			if !errors.Is(err, engine.ErrLimitExceeded) || !errors.Is(err, engine.ErrInvalidArgument) ||
				!strings.Contains(err.Error(), "MaxDepth (24 levels)") {
				t.Errorf("%s, %s at depth %d: %v, want ErrLimitExceeded naming MaxDepth", name, kind, engine.DefaultMaxDepth+1, err)
			}
		}
	}
	// The walk stops at the limit: a hostile depth costs nothing more.
	deep := limitsTask()
	deep.Metadata = map[string]any{"v": nested(100_000)}
	if err := lim.CheckTask(deep); !errors.Is(err, engine.ErrLimitExceeded) {
		t.Fatalf("depth 100000: %v", err)
	}
	if n := testing.AllocsPerRun(10, func() { _ = lim.CheckTask(deep) }); n > 8 {
		t.Errorf("CheckTask allocates %.0f times on a deep task, want a few (the error), not one per level", n)
	}
}

// TestLimitsBytes: MaxTaskBytes counts every string of the task, is
// configurable and can be disabled; messages are checked alone too.
func TestLimitsBytes(t *testing.T) {
	big := func(n int) *a2a.Task {
		task := limitsTask()
		task.History = []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", n)))}
		return task
	}
	var lim engine.Limits
	if err := lim.ValidateTask(big(engine.DefaultMaxTaskBytes - 1024)); err != nil {
		t.Fatalf("task just under the limit: %v", err)
	}
	err := lim.ValidateTask(big(engine.DefaultMaxTaskBytes))
	if !errors.Is(err, engine.ErrLimitExceeded) || !strings.Contains(err.Error(), "MaxTaskBytes (2097152 bytes)") {
		t.Fatalf("task over the limit: %v", err)
	}
	if err := (engine.Limits{MaxTaskBytes: 100}).ValidateTask(big(100)); !errors.Is(err, engine.ErrLimitExceeded) {
		t.Fatalf("custom limit: %v", err)
	}
	if err := (engine.Limits{MaxTaskBytes: -1, MaxDepth: -1}).ValidateTask(big(engine.DefaultMaxTaskBytes * 2)); err != nil {
		t.Fatalf("disabled limit: %v", err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"v": nested(engine.DefaultMaxDepth)}))
	if err := lim.ValidateMessage(msg); !errors.Is(err, engine.ErrLimitExceeded) || !strings.Contains(err.Error(), "message nested deeper") {
		t.Fatalf("deep message: %v", err)
	}
	if err := lim.ValidateMessage(big(engine.DefaultMaxTaskBytes).History[0]); !errors.Is(err, engine.ErrLimitExceeded) {
		t.Fatalf("big message: %v", err)
	}
	// Metadata values of any Go type are measured in their JSON form.
	task := limitsTask()
	task.Metadata = map[string]any{"s": struct{ A [1]map[string]int }{A: [1]map[string]int{{"x": 1}}}}
	if d := engine.TaskShape(task).Depth; d != 4 {
		t.Errorf("depth of a struct value: %d, want 4 (metadata, struct, array, map)", d)
	}
}

// randomJSON returns a random JSON value at most depth levels deep.
func randomJSON(rng *rand.Rand, depth int) any {
	k := rng.IntN(6)
	if depth == 0 {
		k = rng.IntN(4)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return rng.NormFloat64() * 1e6
	case 3:
		return strings.Repeat("é", rng.IntN(200))
	case 4:
		l := make([]any, rng.IntN(5))
		for i := range l {
			l[i] = randomJSON(rng, depth-1)
		}
		return l
	}
	m := map[string]any{}
	for i := range rng.IntN(5) {
		m[fmt.Sprint("k", i, strings.Repeat("y", rng.IntN(300)))] = randomJSON(rng, depth-1)
	}
	return m
}

func randomTask(rng *rand.Rand) *a2a.Task {
	task := limitsTask()
	task.Metadata, _ = randomJSON(rng, 4).(map[string]any)
	msg := func() *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(strings.Repeat("t", rng.IntN(500))),
			a2a.NewDataPart(map[string]any{"d": randomJSON(rng, 5)}), a2a.NewRawPart(make([]byte, rng.IntN(300))))
		m.Metadata, _ = randomJSON(rng, 3).(map[string]any)
		m.ReferenceTasks = []a2a.TaskID{"r"}
		m.Extensions = []string{"e"}
		return m
	}
	task.Status.Message = msg()
	for range rng.IntN(4) {
		task.History = append(task.History, msg())
	}
	for range rng.IntN(3) {
		task.Artifacts = append(task.Artifacts, &a2a.Artifact{ID: "a", Name: "n", Description: "d", Parts: msg().Parts})
	}
	return task
}

// TestShapeBoundsProtobuf: Shape.Bytes is at least the size of the task's
// protobuf form (what a gRPC client must receive), for random tasks and for
// the shapes with the most overhead per byte (many tiny values). Run with
// -run TestShapeBoundsProtobuf -v to see the seed.
func TestShapeBoundsProtobuf(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 14))
	tiny := limitsTask()
	tiny.Metadata = map[string]any{}
	list := make([]any, 1000)
	for i := range list {
		list[i] = map[string]any{"": nil}
		tiny.Metadata[fmt.Sprint(i)] = 0.0
	}
	tiny.Metadata["l"] = list
	tasks := []*a2a.Task{tiny, limitsTask()}
	for range 200 {
		tasks = append(tasks, randomTask(rng))
	}
	for i, task := range tasks {
		pb, err := pbconv.ToProtoTask(task)
		if err != nil {
			t.Fatal(err)
		}
		size, shape := proto.Size(pb), engine.TaskShape(task).Bytes
		if shape < size {
			t.Fatalf("task %d (seed %d): Shape.Bytes %d < protobuf size %d", i, seed, shape, size)
		}
		if i < 2 {
			t.Logf("task %d: Shape.Bytes %d, protobuf %d", i, shape, size)
		}
	}
}

// TestDepthLimitDecodesInProtobuf: a task nested to DefaultMaxDepth in its
// deepest place decodes in every A2A response envelope under the default
// recursion limit of the other protobuf runtimes (100), and the cost model
// in Limits' documentation (7 + 3 levels per object level) holds: one
// level past the 100 budget fails.
func TestDepthLimitDecodesInProtobuf(t *testing.T) {
	task := func(depth int) *a2a.Task {
		task := limitsTask()
		placements["status message data part"](task, nested(depth-1))
		return task
	}
	envelopes := map[string]func(*a2a.Task) (proto.Message, error){
		"GetTask": func(t *a2a.Task) (proto.Message, error) { return pbconv.ToProtoTask(t) },
		"ListTasks": func(t *a2a.Task) (proto.Message, error) {
			return pbconv.ToProtoListTasksResponse(&a2a.ListTasksResponse{Tasks: []*a2a.Task{t}})
		},
		"SendMessage": func(t *a2a.Task) (proto.Message, error) { return pbconv.ToProtoSendMessageResponse(t) },
		"stream":      func(t *a2a.Task) (proto.Message, error) { return pbconv.ToProtoStreamResponse(t) },
		"stream status update": func(t *a2a.Task) (proto.Message, error) {
			return pbconv.ToProtoStreamResponse(&a2a.TaskStatusUpdateEvent{TaskID: t.ID, ContextID: t.ContextID, Status: t.Status})
		},
	}
	decodes := func(build func(*a2a.Task) (proto.Message, error), depth int) bool {
		m, err := build(task(depth))
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return proto.UnmarshalOptions{RecursionLimit: 100}.Unmarshal(b, m.ProtoReflect().New().Interface()) == nil
	}
	for name, build := range envelopes {
		if !decodes(build, engine.DefaultMaxDepth) {
			t.Errorf("%s: a task at DefaultMaxDepth does not decode under recursion limit 100", name)
		}
	}
	// The deepest envelope: StreamResponse{task{status{message{part{data}}}}}.
	// 7 + 3×31 = 100 decodes, 7 + 3×32 = 103 does not.
	if !decodes(envelopes["stream"], 31) || decodes(envelopes["stream"], 32) {
		t.Errorf("the protobuf cost of nesting differs from 7 + 3 per level; revisit DefaultMaxDepth's justification")
	}
	_ = a2apb.TaskState_TASK_STATE_WORKING
}
