package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// LogHandler wraps h for the logs of an A2A server, whose lines carry
// values clients chose: a2a-go attaches the request's task, message and
// context IDs to every line of a call, and error texts quote IDs and
// arguments. It changes two things:
//
//   - Every string attribute value, error text and message longer than
//     maxValueBytes (default 256 when ≤ 0) is cut there, at a character
//     boundary, and marked with the number of bytes dropped, so a 5 MB
//     context ID costs a log line of a few hundred bytes.
//   - A record at WARN or ERROR whose error is an expected outcome of a
//     client's request — task not found, not cancelable, invalid params or
//     request, unauthenticated, the client going away — is logged at
//     DEBUG: it is the client's answer, not a server fault, and a client
//     could otherwise flood the error log with it.
//
// Install it under the logger given to a2a-go:
//
//	logger := slog.New(a2aserver.LogHandler(slog.NewTextHandler(os.Stderr, nil), 0))
//	a2asrv.NewHandler(agent, a2asrv.WithLogger(logger), …)
func LogHandler(h slog.Handler, maxValueBytes int) slog.Handler {
	if maxValueBytes <= 0 {
		maxValueBytes = 256
	}
	return &logHandler{inner: h, max: maxValueBytes}
}

// logHandler defers WithAttrs and WithGroup: a2a-go attaches a call's
// attributes to its logger on every request, and most requests log
// nothing, so they are applied to inner (whose handler may format them at
// once) only when a record is handled.
type logHandler struct {
	inner slog.Handler
	max   int
	ops   []logOp // WithAttrs and WithGroup calls not applied yet, in order
}

// logOp is a deferred WithGroup (group != "") or WithAttrs.
type logOp struct {
	group string
	attrs []slog.Attr
}

// resolved is inner with the deferred calls applied.
func (h *logHandler) resolved() slog.Handler {
	in := h.inner
	for _, op := range h.ops {
		if op.group != "" {
			in = in.WithGroup(h.cut(op.group))
			continue
		}
		cut := make([]slog.Attr, len(op.attrs))
		for i, a := range op.attrs {
			cut[i] = h.attr(a)
		}
		in = in.WithAttrs(cut)
	}
	return in
}

// with returns h with op deferred.
func (h *logHandler) with(op logOp) *logHandler {
	return &logHandler{inner: h.inner, max: h.max, ops: append(h.ops[:len(h.ops):len(h.ops)], op)}
}

// expectedOutcomes are the errors a client's own request causes.
var expectedOutcomes = []error{
	a2a.ErrTaskNotFound, a2a.ErrTaskNotCancelable, a2a.ErrInvalidParams, a2a.ErrInvalidRequest,
	a2a.ErrParseError, a2a.ErrMethodNotFound, a2a.ErrUnauthenticated, a2a.ErrUnauthorized,
	context.Canceled,
}

func (h *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	// A record may be demoted to DEBUG in Handle; it is decided there.
	return h.inner.Enabled(ctx, level)
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	level := r.Level
	out := slog.NewRecord(r.Time, level, h.cut(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if level >= slog.LevelWarn && expected(a.Value) {
			level = slog.LevelDebug
		}
		out.AddAttrs(h.attr(a))
		return true
	})
	if level != r.Level {
		if !h.inner.Enabled(ctx, level) {
			return nil
		}
		out.Level = level
	}
	return h.resolved().Handle(ctx, out)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(logOp{attrs: attrs})
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(logOp{group: name})
}

// expected reports whether v is an error that is an expected outcome.
func expected(v slog.Value) bool {
	err, ok := v.Any().(error)
	if v.Kind() != slog.KindAny || !ok {
		return false
	}
	for _, e := range expectedOutcomes {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// attr returns a with every string in it cut to h.max bytes.
func (h *logHandler) attr(a slog.Attr) slog.Attr {
	a.Key = h.cut(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(h.cut(v.String()))
	case slog.KindGroup:
		group := v.Group()
		cut := make([]slog.Attr, len(group))
		for i, g := range group {
			cut[i] = h.attr(g)
		}
		a.Value = slog.GroupValue(cut...)
	case slog.KindAny:
		var s string
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprintf("%+v", v.Any())
		}
		if len(s) > h.max {
			a.Value = slog.StringValue(h.cut(s))
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}

// cut returns s, or its first h.max bytes (whole characters) marked with
// how many bytes were dropped.
func (h *logHandler) cut(s string) string {
	if len(s) <= h.max {
		return s
	}
	n := h.max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s…[%d more bytes]", s[:n], len(s)-n)
}
