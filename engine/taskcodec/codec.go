package taskcodec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// version is the first byte of every stored form.
const version = 1

// EncodeTask returns the stored form of t. A value metadata or a data part
// cannot hold (a non-finite number, a channel) is engine.ErrInvalidArgument.
func EncodeTask(t *a2a.Task) ([]byte, error) { return AppendTask(make([]byte, 0, 512), t) }

// AppendTask appends the stored form of t (EncodeTask's) to dst and
// returns the extended buffer; on an error it returns nil.
func AppendTask(dst []byte, t *a2a.Task) ([]byte, error) {
	b, _, err := AppendTaskHead(dst, t)
	return b, err
}

// AppendTaskHead is AppendTask, and also returns how many of the bytes it
// appended Decoder.Head reads: the form's start through the status
// message. A caller that keeps what Head decodes copies that much.
func AppendTaskHead(dst []byte, t *a2a.Task) ([]byte, int, error) {
	w := writer{buf: append(dst, version)}
	w.head(t.ID, t.ContextID, t.Status.State, t.Status.Timestamp, t.Status.Message)
	head := len(w.buf) - len(dst)
	w.history(t.History)
	w.artifacts(t.Artifacts)
	w.meta(t.Metadata)
	b, err := w.result("task")
	return b, head, err
}

// DecodeTask decodes the output of EncodeTask into a new task that shares
// nothing with b. A malformed form is engine.ErrInternal: the stored data is
// corrupt.
func DecodeTask(b []byte) (*a2a.Task, error) {
	t := new(a2a.Task)
	if err := decode(b, "task", t); err != nil {
		return nil, err
	}
	return t, nil
}

// EncodeMessage returns the stored form of one history message kept on its
// own: a stored task whose history holds m and nothing else. m may be nil.
func EncodeMessage(m *a2a.Message) ([]byte, error) {
	w := newWriter(128)
	w.head("", "", "", nil, nil)
	w.uvarint(1)
	w.message(m)
	w.artifacts(nil)
	w.meta(nil)
	return w.result("message")
}

// DecodeMessage decodes the output of EncodeMessage.
func DecodeMessage(b []byte) (*a2a.Message, error) {
	t, err := decodePart(b, historyPart)
	if err != nil {
		return nil, err
	}
	return t.History[0], nil
}

// EncodeStatusMessage returns the stored form of a status message kept on
// its own: a stored task whose status holds m and nothing else.
func EncodeStatusMessage(m *a2a.Message) ([]byte, error) {
	w := newWriter(128)
	w.head("", "", "", nil, m)
	w.history(nil)
	w.artifacts(nil)
	w.meta(nil)
	return w.result("status message")
}

// DecodeStatusMessage decodes the output of EncodeStatusMessage.
func DecodeStatusMessage(b []byte) (*a2a.Message, error) {
	t, err := decodePart(b, statusPart)
	if err != nil {
		return nil, err
	}
	return t.Status.Message, nil
}

// EncodeArtifacts returns the stored form of a task's artifacts kept on
// their own: a stored task that holds as and nothing else.
func EncodeArtifacts(as []*a2a.Artifact) ([]byte, error) {
	w := newWriter(256)
	w.head("", "", "", nil, nil)
	w.history(nil)
	w.artifacts(as)
	w.meta(nil)
	return w.result("artifacts")
}

// DecodeArtifacts decodes the output of EncodeArtifacts.
func DecodeArtifacts(b []byte) ([]*a2a.Artifact, error) {
	t, err := decodePart(b, artifactsPart)
	if err != nil {
		return nil, err
	}
	return t.Artifacts, nil
}

// decode decodes a stored task into t, each value allocated on its own.
func decode(b []byte, what string, t *a2a.Task) error {
	// One string holds every string of the task: one allocation, not one
	// per field.
	return decodeString(string(b), what, t, &Decoder{exact: true})
}

// decodeString decodes a stored task held in s into t, allocating from d;
// t's strings share s's bytes.
func decodeString(s, what string, t *a2a.Task, d *Decoder) error {
	if len(s) == 0 || s[0] != version {
		return fmt.Errorf("taskcodec: decode %s: unknown format: %w", what, engine.ErrInternal)
	}
	r := reader{s: s[1:], d: d}
	r.task(t)
	if r.err == nil && r.off != len(r.s) {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return fmt.Errorf("taskcodec: decode %s: %v: %w", what, r.err, engine.ErrInternal)
	}
	return nil
}

// part names a part of a task stored on its own.
type part int

const (
	statusPart part = iota
	historyPart
	artifactsPart
)

var partNames = [...]string{statusPart: "status message", historyPart: "message", artifactsPart: "artifacts"}

// decodePart decodes part p stored on its own and checks the stored task
// holds that part and nothing else (a history part: exactly one message).
func decodePart(b []byte, p part) (a2a.Task, error) {
	var t a2a.Task
	if err := decode(b, partNames[p], &t); err != nil {
		return a2a.Task{}, err
	}
	only := t.ID == "" && t.ContextID == "" && t.Status.State == "" && t.Status.Timestamp == nil && t.Metadata == nil &&
		(p == statusPart || t.Status.Message == nil) &&
		(p == artifactsPart || t.Artifacts == nil) &&
		(p == historyPart) == (len(t.History) == 1) && (p == historyPart || t.History == nil)
	if !only {
		return a2a.Task{}, fmt.Errorf("taskcodec: decode %s: not a stored %s alone: %w", partNames[p], partNames[p], engine.ErrInternal)
	}
	return t, nil
}

// Part content kinds.
const (
	partNone = iota
	partText
	partRaw
	partData
	partURL
)

// nilPart marks a nil *a2a.Part in a part list.
const nilPart = 0xff

type writer struct {
	buf []byte
	err error
}

func newWriter(capacity int) writer {
	w := writer{buf: make([]byte, 0, capacity)}
	w.buf = append(w.buf, version)
	return w
}

// result is the encoded form, or the first error as ErrInvalidArgument.
func (w *writer) result(what string) ([]byte, error) {
	if w.err != nil {
		return nil, fmt.Errorf("taskcodec: encode %s: %v: %w", what, w.err, engine.ErrInvalidArgument)
	}
	return w.buf, nil
}

func (w *writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *writer) uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }

func (w *writer) str(s string) {
	w.uvarint(uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *writer) strs(ss []string) {
	w.uvarint(uint64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// present writes whether an optional field is set, and reports it.
func (w *writer) present(set bool) bool {
	if set {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
	return set
}

// time writes an optional timestamp as a string of its stored form.
func (w *writer) time(t *time.Time) {
	if !w.present(t != nil) {
		return
	}
	// The form is at most 16 bytes, so its uvarint length is one byte:
	// write the bytes in place, then the length before them.
	at := len(w.buf)
	w.buf = AppendTimestamp(append(w.buf, 0), *t)
	w.buf[at] = byte(len(w.buf) - at - 1)
}

// head writes the fields that precede the history.
func (w *writer) head(id a2a.TaskID, contextID string, state a2a.TaskState, ts *time.Time, status *a2a.Message) {
	w.str(string(id))
	w.str(contextID)
	w.str(string(state))
	w.time(ts)
	w.message(status)
}

func (w *writer) history(ms []*a2a.Message) {
	w.uvarint(uint64(len(ms)))
	for _, m := range ms {
		w.message(m)
	}
}

func (w *writer) artifacts(as []*a2a.Artifact) {
	w.uvarint(uint64(len(as)))
	for _, a := range as {
		w.artifact(a)
	}
}

// JSON value kinds of the binary value form.
const (
	valNull = iota
	valFalse
	valTrue
	valNumber
	valString
	valArray
	valObject
)

// value stores a JSON value (what encoding/json decodes into an any: nil,
// bool, float64, string, []any, map[string]any). Any other Go value is first
// normalized through encoding/json, so it reads back as it would from the
// wire.
func (w *writer) value(v any) {
	switch v := v.(type) {
	case nil:
		w.buf = append(w.buf, valNull)
	case bool:
		if v {
			w.buf = append(w.buf, valTrue)
		} else {
			w.buf = append(w.buf, valFalse)
		}
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			w.fail(errors.New("metadata number is not finite"))
			return
		}
		w.buf = append(w.buf, valNumber)
		w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(v))
	case string:
		w.buf = append(w.buf, valString)
		w.str(v)
	case []any:
		w.buf = append(w.buf, valArray)
		w.uvarint(uint64(len(v)))
		for _, e := range v {
			w.value(e)
		}
	case map[string]any:
		w.buf = append(w.buf, valObject)
		w.uvarint(uint64(len(v)))
		for k, e := range v {
			w.str(k)
			w.value(e)
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			w.fail(err)
			return
		}
		var norm any
		if err := json.Unmarshal(b, &norm); err != nil {
			w.fail(err)
			return
		}
		w.value(norm)
	}
}

// meta stores a metadata map; nil is distinct from empty only in that both
// are absent on the wire.
func (w *writer) meta(m map[string]any) {
	if m == nil {
		w.buf = append(w.buf, valNull)
		return
	}
	w.value(m)
}

func (w *writer) message(m *a2a.Message) {
	if !w.present(m != nil) {
		return
	}
	w.str(m.ID)
	w.str(m.ContextID)
	w.strs(m.Extensions)
	w.meta(m.Metadata)
	w.parts(m.Parts)
	w.uvarint(uint64(len(m.ReferenceTasks)))
	for _, id := range m.ReferenceTasks {
		w.str(string(id))
	}
	w.str(string(m.Role))
	w.str(string(m.TaskID))
}

func (w *writer) artifact(a *a2a.Artifact) {
	if !w.present(a != nil) {
		return
	}
	w.str(string(a.ID))
	w.str(a.Description)
	w.strs(a.Extensions)
	w.meta(a.Metadata)
	w.str(a.Name)
	w.parts(a.Parts)
}

func (w *writer) parts(ps a2a.ContentParts) {
	w.uvarint(uint64(len(ps)))
	for _, p := range ps {
		if p == nil {
			w.buf = append(w.buf, nilPart)
			continue
		}
		switch c := p.Content.(type) {
		case nil:
			w.buf = append(w.buf, partNone)
		case a2a.Text:
			w.buf = append(w.buf, partText)
			w.str(string(c))
		case a2a.Raw:
			w.buf = append(w.buf, partRaw)
			w.str(string(c))
		case a2a.Data:
			w.buf = append(w.buf, partData)
			w.value(c.Value)
		case a2a.URL:
			w.buf = append(w.buf, partURL)
			w.str(string(c))
		default:
			w.fail(fmt.Errorf("unknown part content %T", c))
		}
		w.str(p.Filename)
		w.str(p.MediaType)
		w.meta(p.Metadata)
	}
}

type reader struct {
	s   string
	off int
	err error
	d   *Decoder // where values are allocated
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
	r.off = len(r.s)
}

func (r *reader) byte() byte {
	if r.off >= len(r.s) {
		r.fail("truncated")
		return 0
	}
	r.off++
	return r.s[r.off-1]
}

func (r *reader) uvarint() uint64 {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b := r.byte()
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v
		}
	}
	r.fail("bad varint")
	return 0
}

// count reads a length that must fit in what is left of the input (every
// element takes at least one byte).
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.s)-r.off) {
		r.fail("bad count")
		return 0
	}
	return int(n)
}

func (r *reader) str() string {
	n := r.count()
	s := r.s[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) strs() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	ss := r.d.strs.take(n, r.d.exact)
	for i := range ss {
		ss[i] = r.str()
	}
	return ss
}

func (r *reader) time() *time.Time {
	if r.byte() == 0 {
		return nil
	}
	t := &r.d.times.take(1, r.d.exact)[0]
	if err := t.UnmarshalBinary([]byte(r.str())); err != nil {
		r.fail("bad time")
	}
	return t
}

// task reads the fields of a stored task, after the version byte, into t.
func (r *reader) task(t *a2a.Task) {
	r.head(t)
	if n := r.count(); n > 0 {
		keep := n
		if r.d.shaped && r.d.history >= 0 {
			keep = min(n, r.d.history)
		}
		for range n - keep {
			r.skipMessage() // trimmed away (Decoder.Shape): parsed, not built
		}
		if keep > 0 {
			t.History = r.d.msgPtrs.take(keep, r.d.exact)
			for i := range t.History {
				t.History[i] = r.message()
			}
		}
	}
	if n := r.count(); n > 0 {
		if r.d.shaped && !r.d.artifacts {
			for range n {
				r.skipArtifact()
			}
		} else {
			t.Artifacts = r.d.artPtrs.take(n, r.d.exact)
			for i := range t.Artifacts {
				t.Artifacts[i] = r.artifact()
			}
		}
	}
	t.Metadata = r.meta()
}

// head reads the fields that precede the history (writer.head) into t.
func (r *reader) head(t *a2a.Task) {
	t.ID, t.ContextID = a2a.TaskID(r.str()), r.str()
	t.Status.State = a2a.TaskState(r.str())
	t.Status.Timestamp = r.time()
	t.Status.Message = r.message()
}

// The skip functions read what their namesakes read, checking it the
// same way, but build nothing: for the parts of a task a page trims away.

func (r *reader) skipValue() {
	switch r.byte() {
	case valNull, valFalse, valTrue:
	case valNumber:
		if len(r.s)-r.off < 8 {
			r.fail("truncated")
			return
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64([]byte(r.s[r.off : r.off+8])))
		r.off += 8
		if math.IsNaN(v) || math.IsInf(v, 0) {
			r.fail("number is not finite")
		}
	case valString:
		r.str()
	case valArray:
		for range r.count() {
			r.skipValue()
		}
	case valObject:
		for range r.count() {
			r.str()
			r.skipValue()
		}
	default:
		r.fail("bad value kind")
	}
}

func (r *reader) skipStrs() {
	for range r.count() {
		r.str()
	}
}

func (r *reader) skipMessage() {
	if r.byte() == 0 {
		return
	}
	r.str()
	r.str()
	r.skipStrs()
	r.skipValue()
	r.skipParts()
	r.skipStrs() // reference tasks
	r.str()
	r.str()
}

func (r *reader) skipArtifact() {
	if r.byte() == 0 {
		return
	}
	r.str()
	r.str()
	r.skipStrs()
	r.skipValue()
	r.str()
	r.skipParts()
}

func (r *reader) skipParts() {
	for range r.count() {
		switch kind := r.byte(); kind {
		case nilPart:
			continue
		case partNone:
		case partText, partRaw, partURL:
			r.str()
		case partData:
			r.skipValue()
		default:
			r.fail("bad part kind")
		}
		r.str()
		r.str()
		r.skipValue()
	}
}

// value reads a JSON value stored by writer.value.
func (r *reader) value() any {
	switch r.byte() {
	case valNull:
		return nil
	case valFalse:
		return false
	case valTrue:
		return true
	case valNumber:
		if len(r.s)-r.off < 8 {
			r.fail("truncated")
			return nil
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64([]byte(r.s[r.off : r.off+8])))
		r.off += 8
		if math.IsNaN(v) || math.IsInf(v, 0) {
			r.fail("number is not finite")
		}
		return v
	case valString:
		return r.str()
	case valArray:
		n := r.count()
		a := make([]any, n)
		for i := range a {
			a[i] = r.value()
		}
		return a
	case valObject:
		n := r.count()
		m := make(map[string]any, n)
		for range n {
			k := r.str()
			m[k] = r.value()
		}
		return m
	}
	r.fail("bad value kind")
	return nil
}

func (r *reader) meta() map[string]any {
	v := r.value()
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		r.fail("metadata is not an object")
	}
	return m
}

func (r *reader) message() *a2a.Message {
	if r.byte() == 0 {
		return nil
	}
	m := &r.d.msgs.take(1, r.d.exact)[0]
	m.ID, m.ContextID = r.str(), r.str()
	m.Extensions, m.Metadata = r.strs(), r.meta()
	m.Parts = r.parts()
	if n := r.count(); n > 0 {
		m.ReferenceTasks = make([]a2a.TaskID, n)
		for i := range m.ReferenceTasks {
			m.ReferenceTasks[i] = a2a.TaskID(r.str())
		}
	}
	m.Role = a2a.MessageRole(r.str())
	m.TaskID = a2a.TaskID(r.str())
	return m
}

func (r *reader) artifact() *a2a.Artifact {
	if r.byte() == 0 {
		return nil
	}
	a := &r.d.arts.take(1, r.d.exact)[0]
	a.ID, a.Description = a2a.ArtifactID(r.str()), r.str()
	a.Extensions, a.Metadata = r.strs(), r.meta()
	a.Name = r.str()
	a.Parts = r.parts()
	return a
}

func (r *reader) parts() a2a.ContentParts {
	n := r.count()
	if n == 0 {
		return nil
	}
	ps := a2a.ContentParts(r.d.partPtrs.take(n, r.d.exact))
	// One allocation for all parts of the list (at most).
	backing := r.d.parts.take(n, r.d.exact)
	for i := range ps {
		kind := r.byte()
		if kind == nilPart {
			continue
		}
		p := &backing[i]
		switch kind {
		case partNone:
		case partText:
			p.Content = a2a.Text(r.str())
		case partRaw:
			p.Content = a2a.Raw(r.str())
		case partData:
			p.Content = a2a.Data{Value: r.value()}
		case partURL:
			p.Content = a2a.URL(r.str())
		default:
			r.fail("bad part kind")
		}
		p.Filename, p.MediaType, p.Metadata = r.str(), r.str(), r.meta()
		ps[i] = p
	}
	return ps
}
