package a2aserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/log"
)

// TestLogHandler: client-supplied strings are cut in every place a2a-go
// puts them (attributes bound to the request logger, groups, error texts),
// and client-caused outcomes logged at ERROR come out at DEBUG.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(LogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), 100))
	huge := strings.Repeat("é", 2<<20) // 4 MB of two-byte characters

	// As a2a-go's InterceptedHandler binds request attributes.
	reqLogger := logger.WithGroup("a2a").With(slog.String("context_id", huge))
	ctx := log.AttachLogger(context.Background(), reqLogger)
	log.Error(ctx, "store failed", fmt.Errorf("pebblestore: task %q: boom", huge))
	log.Error(ctx, "canceler setup failed", fmt.Errorf("failed to load a task: %w", a2a.ErrTaskNotCancelable))
	log.Warn(ctx, "task cancelation failed", "cause", fmt.Errorf("x: %w", a2a.ErrTaskNotFound))
	logger.Info("group", slog.Group("g", slog.String("v", huge)))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if len(l) > 1000 {
			t.Errorf("log line of %d bytes, want the values cut to 100 bytes: %.200s…", len(l), l)
		}
		if !strings.Contains(l, "more bytes]") {
			t.Errorf("no truncation mark in %q", l)
		}
	}
	for i, want := range []string{"level=ERROR", "level=DEBUG", "level=DEBUG", "level=INFO"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %q, want %s", i, lines[i], want)
		}
	}

	// A demoted record is dropped when DEBUG is off.
	buf.Reset()
	quiet := slog.New(LogHandler(slog.NewTextHandler(&buf, nil), 0))
	log.Error(log.AttachLogger(context.Background(), quiet), "canceler setup failed", a2a.ErrTaskNotCancelable)
	if buf.Len() != 0 {
		t.Errorf("expected outcome logged at the default level: %s", buf.String())
	}
}

// countingHandler counts the WithAttrs calls that reach it.
type countingHandler struct {
	slog.Handler
	withAttrs *int
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	*h.withAttrs++
	return countingHandler{h.Handler.WithAttrs(as), h.withAttrs}
}

// TestLogHandlerDefersAttrs: attributes attached to a logger that logs
// nothing cost the wrapped handler nothing (a2a-go attaches a call's on
// every request); a record logged gets them, cut, in order.
func TestLogHandlerDefersAttrs(t *testing.T) {
	var buf bytes.Buffer
	n := 0
	h := LogHandler(countingHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), &n}, 8)
	l := slog.New(h).With("task_id", "0123456789abcdef").WithGroup("g").With("k", "v")
	l.Debug("not logged")
	if n != 0 || buf.Len() != 0 {
		t.Fatalf("a logger that logged nothing applied %d WithAttrs calls, wrote %q", n, buf.String())
	}
	l.Info("logged")
	out := buf.String()
	if n == 0 || !strings.Contains(out, `task_id="01234567`) || !strings.Contains(out, "g.k=v") || strings.Contains(out, "89abcdef") {
		t.Fatalf("logged %q with %d WithAttrs calls", out, n)
	}
}
