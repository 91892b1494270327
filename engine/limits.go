package engine

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Limits bound the shape of the tasks a store accepts, so that every task it
// holds can be served to any A2A client: read whole by gRPC clients with
// their default 4 MiB message limit, and decoded by protobuf runtimes with
// their default recursion limit of 100 (C++, Java, Python, C#). Every backend
// applies them the same way, before anything is written: Create and Replace
// check the new content, AppendHistory the message and the task it would
// produce. A violation is ErrLimitExceeded (an ErrInvalidArgument) whose
// message names the limit, and changes nothing (S3).
//
// The zero value is valid: each field left 0 takes its default. A negative
// field disables that limit; do that only for stores no remote client
// reads.
type Limits struct {
	// MaxTaskBytes bounds a task's size as TaskShape measures it (an upper
	// bound on its protobuf encoding). Default DefaultMaxTaskBytes (2 MiB):
	// a task at the limit fits a default gRPC client's 4 MiB receive limit
	// with room for the envelope, and a 4 MiB request body (the HTTP
	// default of a2aserver.ServeLimits) cannot become an unreadable task.
	MaxTaskBytes int
	// MaxDepth bounds the nesting of metadata maps (of the task, its
	// messages, artifacts and parts) and data-part values: a map or list is
	// one level, a scalar none. Default DefaultMaxDepth (24). In protobuf
	// every object level costs three nested messages (Struct, map entry,
	// Value) and the deepest A2A envelope (a stream response carrying a
	// task whose status message holds a data part) adds seven, so depth 24
	// decodes at 7+3×24 = 79 levels, with margin below 100.
	MaxDepth int
}

// Defaults of Limits.
const (
	DefaultMaxTaskBytes = 2 << 20
	DefaultMaxDepth     = 24
)

// ErrLimitExceeded is the error of content beyond a store's Limits:
// errors.Is(ErrLimitExceeded, ErrInvalidArgument) holds. The wrapping error
// names the limit; it never quotes the content.
var ErrLimitExceeded error = &childError{msg: "engine: task exceeds a store limit", parent: ErrInvalidArgument}

func (l Limits) maxBytes() int { return limitOr(l.MaxTaskBytes, DefaultMaxTaskBytes) }
func (l Limits) maxDepth() int { return limitOr(l.MaxDepth, DefaultMaxDepth) }

// limitOr is v, or def when v is 0; a negative v means no limit.
func limitOr(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return int(^uint(0) >> 1)
	}
	return v
}

// ValidateTask is engine.ValidateTask (S8) followed by CheckTask.
func (l Limits) ValidateTask(t *a2a.Task) error {
	if err := ValidateTask(t); err != nil {
		return err
	}
	return l.CheckTask(t)
}

// ValidateMessage is engine.ValidateMessage followed by CheckMessage.
func (l Limits) ValidateMessage(m *a2a.Message) error {
	if err := ValidateMessage(m); err != nil {
		return err
	}
	return l.CheckMessage(m)
}

// CheckTask checks t against the limits. It walks t once without encoding
// or allocating, and stops as soon as a limit is exceeded.
func (l Limits) CheckTask(t *a2a.Task) error {
	m := l.meter()
	m.task(t)
	return m.err("task")
}

// CheckMessage checks one message against the limits, as if it were the
// only content of a task: AppendHistory calls it before reading the task,
// then checks the task the message would produce.
func (l Limits) CheckMessage(msg *a2a.Message) error {
	m := l.meter()
	m.message(msg)
	return m.err("message")
}

func (l Limits) meter() meter {
	return meter{maxBytes: l.maxBytes(), maxDepth: l.maxDepth()}
}

// Shape is what Limits measure of a task.
type Shape struct {
	// Bytes is an upper bound on the task's protobuf encoding (the form
	// gRPC clients receive): the length of every string and byte field
	// plus a fixed allowance per field and value for tags, lengths and
	// wrapper messages. The stored binary form is smaller. The JSON form
	// can be larger: raw bytes travel as base64 (4/3) and control
	// characters as escapes.
	Bytes int
	// Depth is the deepest nesting of a metadata map or data-part value
	// (a map or list is one level; 0 = no map or list anywhere).
	Depth int
}

// TaskShape measures t without encoding it. Unlike CheckTask it walks the
// whole task.
func TaskShape(t *a2a.Task) Shape {
	m := meter{maxBytes: -1, maxDepth: -1}
	m.task(t)
	return Shape{Bytes: m.bytes, Depth: m.depth}
}

// Allowances per item, chosen so that Shape.Bytes bounds the protobuf size
// (a test checks it against proto.Size of a2a-go's protobuf form): a string
// field costs its tag and a length of up to five bytes; a JSON value in a
// Struct costs up to three wrapper messages (map entry, Value, Struct or
// ListValue), each with a tag and a length.
const (
	fieldOverhead = 8
	valueOverhead = 12
	numberBytes   = 9
)

// meter accumulates a Shape and notes the first limit crossed. The limits
// are checked as it goes, so a huge or deeply nested task costs no more
// than the part of it within the limits.
type meter struct {
	maxBytes, maxDepth int // negative: measure everything
	bytes, depth       int
	over               string // the first limit crossed, "" = none
}

func (m *meter) done() bool { return m.over != "" }

func (m *meter) add(n int) {
	m.bytes += n
	if m.maxBytes >= 0 && m.bytes > m.maxBytes && m.over == "" {
		m.over = "MaxTaskBytes"
	}
}

func (m *meter) str(s string) { m.add(len(s) + fieldOverhead) }

func (m *meter) err(what string) error {
	switch m.over {
	case "":
		return nil
	case "MaxTaskBytes":
		return fmt.Errorf("engine: %s larger than MaxTaskBytes (%d bytes): %w", what, m.maxBytes, ErrLimitExceeded)
	default:
		return fmt.Errorf("engine: %s nested deeper than MaxDepth (%d levels): %w", what, m.maxDepth, ErrLimitExceeded)
	}
}

func (m *meter) task(t *a2a.Task) {
	if t == nil {
		return
	}
	m.str(string(t.ID))
	m.str(t.ContextID)
	m.str(string(t.Status.State))
	if t.Status.Timestamp != nil {
		m.add(2 * fieldOverhead)
	}
	m.message(t.Status.Message)
	for _, msg := range t.History {
		m.message(msg)
	}
	for _, a := range t.Artifacts {
		m.artifact(a)
	}
	m.meta(t.Metadata)
}

func (m *meter) message(msg *a2a.Message) {
	if msg == nil || m.done() {
		return
	}
	m.add(fieldOverhead)
	m.str(msg.ID)
	m.str(msg.ContextID)
	for _, e := range msg.Extensions {
		m.str(e)
	}
	m.meta(msg.Metadata)
	m.parts(msg.Parts)
	for _, id := range msg.ReferenceTasks {
		m.str(string(id))
	}
	m.str(string(msg.Role))
	m.str(string(msg.TaskID))
}

func (m *meter) artifact(a *a2a.Artifact) {
	if a == nil || m.done() {
		return
	}
	m.add(fieldOverhead)
	m.str(string(a.ID))
	m.str(a.Description)
	for _, e := range a.Extensions {
		m.str(e)
	}
	m.meta(a.Metadata)
	m.str(a.Name)
	m.parts(a.Parts)
}

func (m *meter) parts(ps a2a.ContentParts) {
	for _, p := range ps {
		if m.done() {
			return
		}
		if p == nil {
			continue
		}
		m.add(fieldOverhead)
		switch c := p.Content.(type) {
		case a2a.Text:
			m.str(string(c))
		case a2a.Raw:
			m.str(string(c))
		case a2a.URL:
			m.str(string(c))
		case a2a.Data:
			m.add(fieldOverhead)
			m.value(c.Value, 0)
		}
		m.str(p.Filename)
		m.str(p.MediaType)
		m.meta(p.Metadata)
	}
}

func (m *meter) meta(md map[string]any) {
	if md != nil {
		m.value(md, 0)
	}
}

// value measures a JSON value at nesting level depth (the levels above it).
// Values other than what encoding/json decodes into an any are measured in
// their JSON form, as the stores keep them.
func (m *meter) value(v any, depth int) {
	if m.done() {
		return
	}
	switch v.(type) {
	case nil, bool, float64, string, []any, map[string]any:
	case int, int64, int32, uint, uint64, uint32, json.Number:
		v = 0.0
	default:
		v = normalize(v)
	}
	m.add(valueOverhead)
	switch v := v.(type) {
	case float64:
		m.add(numberBytes)
	case string:
		m.add(len(v))
	case []any:
		if !m.enter(depth + 1) {
			return
		}
		for _, e := range v {
			m.value(e, depth+1)
		}
	case map[string]any:
		if !m.enter(depth + 1) {
			return
		}
		for k, e := range v {
			m.add(len(k) + fieldOverhead)
			m.value(e, depth+1)
		}
	}
}

// enter records a container at level depth and reports whether its
// contents are worth measuring (false once MaxDepth is crossed).
func (m *meter) enter(depth int) bool {
	m.depth = max(m.depth, depth)
	if m.maxDepth >= 0 && depth > m.maxDepth {
		if m.over == "" {
			m.over = "MaxDepth"
		}
		return false
	}
	return true
}

// normalize turns any Go value into what encoding/json would decode from
// its JSON form; a value that does not marshal counts as its %v string
// (the store's encoder rejects it anyway).
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return strconv.Quote(fmt.Sprint(v))
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return string(b)
	}
	return out
}
