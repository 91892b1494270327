package pebblelog_test

import (
	"strings"
	"testing"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

func TestQuiet(t *testing.T) {
	var b strings.Builder
	q := pebblelog.Quiet{Errors: &b}
	q.Infof("flushed %d", 1)
	q.Errorf("disk %s", "full")
	if got := b.String(); got != "pebble: disk full\n" {
		t.Fatalf("wrote %q", got)
	}
	pebblelog.Quiet{}.Errorf("dropped") // no writer: no panic
	defer func() {
		if r := recover(); r == nil || !strings.Contains(b.String(), "pebble: fatal: boom") {
			t.Fatalf("Fatalf: recovered %v, wrote %q", r, b.String())
		}
	}()
	q.Fatalf("boom")
}
