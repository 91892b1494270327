package a2aserver

import (
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// TaskStoreOptions configure NewTaskStore. The zero value is valid.
type TaskStoreOptions struct {
	// MaxPageBytes bounds the size of a ListTasks page, as the sum of
	// engine.TaskShape's Bytes of its tasks (an upper bound on their
	// protobuf size) plus what their JSON form takes beyond that (escapes
	// such as \u003c for '<', base64 for raw bytes, longer keys), so that
	// the page fits both forms. A page that would exceed it ends early — with at
	// least one task — and its NextPageToken continues after the last
	// task it holds, as for any page shorter than its page size (SPEC L1,
	// T6). Without it, 100 tasks of up to 2 MiB each (engine.Limits'
	// default) make a page no default gRPC client can receive (4 MiB), and
	// a traversal stops there for good. Default DefaultMaxPageBytes (3 MiB);
	// negative: no limit.
	MaxPageBytes int
}

// DefaultMaxPageBytes is the default TaskStoreOptions.MaxPageBytes.
const DefaultMaxPageBytes = 3 << 20

// EnsureDefaults fills unset fields with their defaults.
func (o *TaskStoreOptions) EnsureDefaults() {
	if o.MaxPageBytes == 0 {
		o.MaxPageBytes = DefaultMaxPageBytes
	}
}

// fitPage ends resp early when its tasks exceed maxBytes together, each
// measured by wireBytes, so the page fits both its protobuf and its JSON
// form. It needs the page's cursors to make the token (A7: the authz
// dispatcher and the backends return them aligned); without them it
// leaves the page as it is.
func fitPage(resp *engine.ListResponse, maxBytes int) {
	if maxBytes < 0 || len(resp.Tasks) < 2 || len(resp.TaskCursors) != len(resp.Tasks) {
		return
	}
	total := 0
	for _, t := range resp.Tasks {
		total += engine.TaskShape(t).Bytes
	}
	if total*maxJSONFactor <= maxBytes {
		return // fits whatever the escapes: no need to read the strings
	}
	total = 0
	for i, t := range resp.Tasks {
		total += engine.TaskShape(t).Bytes + jsonExtra(t)
		if i > 0 && total > maxBytes {
			resp.Tasks, resp.TaskCursors = resp.Tasks[:i], resp.TaskCursors[:i]
			resp.NextPageToken = engine.EncodeToken(resp.TaskCursors[i-1])
			return
		}
	}
}

// JSON allowances beyond what engine.TaskShape counts, chosen so that
// TaskShape(t).Bytes + jsonExtra(t) bounds the size of t's JSON form as
// a2a-go writes it (encoding/json, HTML escaping on; a test checks it):
// a field's key costs up to 20 bytes in JSON ("referenceTaskIds":[…],)
// where TaskShape allows 8 for a protobuf tag and length, a number up to
// 25 ("-1.2345678901234567e-300,") where it allows 21, the status
// timestamp up to 46 where it allows 16, and the task's braces and fixed
// keys some more.
const (
	jsonFieldExtra     = 12
	jsonNumberExtra    = 4
	jsonTimestampExtra = 32
	jsonTaskExtra      = 64
	// maxJSONFactor bounds TaskShape(t).Bytes + jsonExtra(t) as a
	// multiple of TaskShape(t).Bytes: a string byte costs at most 6 bytes
	// in JSON (\u003c), and every allowance above is below 5 times what
	// TaskShape counts for the same item.
	maxJSONFactor = 6
)

// jsonExtra is how many bytes t's JSON form may take beyond
// engine.TaskShape(t).Bytes: escapes (<, >, & and control characters as
// \u00XX, quotes and backslashes doubled, U+2028/2029 and invalid UTF-8
// as \uXXXX), raw bytes as base64, and longer field keys. TaskShape bounds
// the protobuf form (what gRPC clients receive); a task whose text is all
// '<' is six times larger in JSON.
func jsonExtra(t *a2a.Task) int {
	n := jsonTaskExtra + jsonString(string(t.ID)) + jsonString(t.ContextID)
	if t.Status.Timestamp != nil {
		n += jsonTimestampExtra
	}
	n += jsonMessage(t.Status.Message)
	for _, m := range t.History {
		n += jsonMessage(m)
	}
	for _, a := range t.Artifacts {
		if a == nil {
			continue
		}
		n += jsonFieldExtra + jsonString(string(a.ID)) + jsonString(a.Name) + jsonString(a.Description) +
			jsonStrings(a.Extensions) + jsonValue(a.Metadata) + jsonParts(a.Parts)
	}
	return n + jsonValue(t.Metadata)
}

func jsonMessage(m *a2a.Message) int {
	if m == nil {
		return 0
	}
	n := jsonFieldExtra + jsonString(m.ID) + jsonString(m.ContextID) + jsonString(string(m.TaskID)) +
		jsonString(string(m.Role)) + jsonStrings(m.Extensions) + jsonValue(m.Metadata) + jsonParts(m.Parts)
	for _, id := range m.ReferenceTasks {
		n += jsonString(string(id))
	}
	return n
}

func jsonParts(ps a2a.ContentParts) int {
	n := 0
	for _, p := range ps {
		if p == nil {
			continue
		}
		n += jsonFieldExtra + jsonString(p.Filename) + jsonString(p.MediaType) + jsonValue(p.Metadata)
		switch c := p.Content.(type) {
		case a2a.Text:
			n += jsonString(string(c))
		case a2a.URL:
			n += jsonString(string(c))
		case a2a.Raw:
			n += jsonFieldExtra + base64.StdEncoding.EncodedLen(len(c)) - len(c)
		case a2a.Data:
			n += jsonFieldExtra + jsonValue(c.Value)
		}
	}
	return n
}

func jsonStrings(ss []string) int {
	n := 0
	for _, s := range ss {
		n += jsonString(s)
	}
	return n
}

// jsonValue is jsonExtra for a metadata map or data-part value.
func jsonValue(v any) int {
	switch v := v.(type) {
	case nil, bool:
		return 0
	case string:
		return jsonString(v)
	case float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
		return jsonNumberExtra
	case []any:
		n := 0
		for _, e := range v {
			n += jsonValue(e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range v {
			n += jsonString(k) + jsonValue(e)
		}
		return n
	}
	b, _ := json.Marshal(v) // what TaskShape normalizes; rare
	return len(b)
}

// jsonString is a string's field allowance plus what encoding/json's
// escaping adds to it.
func jsonString(s string) int {
	n := jsonFieldExtra
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b < 0x20, b == '<', b == '>', b == '&':
				n += 5 // \u00XX
			case b == '"', b == '\\':
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5 // \ufffd for one byte
		case r == '\u2028', r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}
