package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The limits clauses (limits/depth, limits/size) check that a store
// enforces the default engine.Limits (as a store opened with zero Options
// does) on every write, and that a rejected write changes nothing (S3).

// deepValue is a JSON object nested levels deep.
func deepValue(levels int) any {
	var v any = "leaf"
	for range levels {
		v = map[string]any{"k": v}
	}
	return v
}

// expectLimit checks err is ErrLimitExceeded, an ErrInvalidArgument.
func expectLimit(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrLimitExceeded) || !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("%s: %v, want engine.ErrLimitExceeded (an ErrInvalidArgument)", what, err)
	}
}

func testDepthLimit(t testing.TB, e *env) {
	// Metadata at exactly DefaultMaxDepth (the metadata map is level 1) is
	// stored and read back.
	ok := spec{id: "deep-ok", ctx: "ctx-a", history: 1, tag: "v1"}.build()
	ok.Metadata["deep"] = deepValue(engine.DefaultMaxDepth - 1)
	e.mustCreate(t, ok)
	if got := e.mustGet(t, ok.ID); canon(got.Task) != canon(ok) {
		t.Errorf("task at the depth limit reads back changed")
	}

	deep := spec{id: "deep-bad", ctx: "ctx-a", tag: "v1"}.build()
	deep.Metadata["deep"] = deepValue(engine.DefaultMaxDepth)
	_, err := e.s.Create(e.ctx, deep)
	expectLimit(t, "Create with metadata one level too deep", err)
	if _, err := e.s.Get(e.ctx, deep.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("rejected Create left a task behind: %v", err)
	}

	before := e.mustGet(t, ok.ID)
	e.tick(10)
	bad := clone(ok)
	bad.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"d": deepValue(engine.DefaultMaxDepth)})}}}
	_, err = e.s.Replace(e.ctx, bad, 0)
	expectLimit(t, "Replace with a data part one level too deep", err)
	e.expectUnchanged(t, "rejected Replace", before)

	e.tick(10)
	msg := newMessage("deep-msg")
	msg.Metadata = map[string]any{"d": deepValue(engine.DefaultMaxDepth)}
	_, err = e.s.AppendHistory(e.ctx, ok.ID, msg)
	expectLimit(t, "AppendHistory of a message one level too deep", err)
	e.expectUnchanged(t, "rejected AppendHistory", before)
}

func testSizeLimit(t testing.TB, e *env) {
	text := func(n int) *a2a.Part { return a2a.NewTextPart(strings.Repeat("x", n)) }
	big := spec{id: "big-bad", ctx: "ctx-a", tag: "v1"}.build()
	big.Status.Message.Parts = a2a.ContentParts{text(engine.DefaultMaxTaskBytes)}
	_, err := e.s.Create(e.ctx, big)
	expectLimit(t, "Create of a task over MaxTaskBytes", err)
	if _, err := e.s.Get(e.ctx, big.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("rejected Create left a task behind: %v", err)
	}

	// A task most of the limit large: stored; growing it past the limit
	// by Replace or AppendHistory is rejected and changes nothing.
	tk := spec{id: "big-ok", ctx: "ctx-a", history: 1, tag: "v1"}.build()
	tk.History[0].Parts = a2a.ContentParts{text(engine.DefaultMaxTaskBytes * 3 / 4)}
	e.mustCreate(t, tk)
	before := e.mustGet(t, tk.ID)

	e.tick(10)
	grown := clone(tk)
	grown.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{text(engine.DefaultMaxTaskBytes / 2)}}}
	_, err = e.s.Replace(e.ctx, grown, before.Revision)
	expectLimit(t, "Replace growing the task past MaxTaskBytes", err)
	e.expectUnchanged(t, "rejected Replace", before)

	e.tick(10)
	msg := newMessage("big-msg")
	msg.Parts = a2a.ContentParts{text(engine.DefaultMaxTaskBytes / 2)}
	_, err = e.s.AppendHistory(e.ctx, tk.ID, msg)
	expectLimit(t, "AppendHistory growing the task past MaxTaskBytes", err)
	e.expectUnchanged(t, "rejected AppendHistory", before)

	e.tick(10)
	msg.Parts = a2a.ContentParts{text(engine.DefaultMaxTaskBytes)}
	_, err = e.s.AppendHistory(e.ctx, tk.ID, msg)
	expectLimit(t, "AppendHistory of a message over MaxTaskBytes", err)
	e.expectUnchanged(t, "rejected AppendHistory", before)

	// A message that fits is still appended.
	e.tick(10)
	msg.Parts = a2a.ContentParts{text(1000)}
	got, err := e.s.AppendHistory(e.ctx, tk.ID, msg)
	e.advanced(t, "AppendHistory within the limit", before, got, err)
}
