package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pushdelivery"
)

// TestBackupEndpoint (X1): with -backup-dir, POST /backup on the metrics
// listener takes a checkpoint while the server runs; it opens and passes
// CheckInvariants with the server's tasks. A name that exists is refused
// (409), one that is not a plain path element too (400, nothing written
// outside -backup-dir), and the A2A listener does not serve it. Checked
// by accepting any name: "../escape" is written beside -backup-dir.
func TestBackupEndpoint(t *testing.T) {
	dir := t.TempDir()
	backups := filepath.Join(dir, "backups")
	ts := startServer(t, config{Backend: "pebble", PebbleDir: filepath.Join(dir, "db"), BackupDir: backups})
	for range 5 {
		send(t, ts.clients[transports[0]], "", "hello")
	}
	metrics := "http://" + ts.metricsLn.Addr().String()
	post := func(base, query string) (int, string) {
		resp, err := http.Post(base+backupPath+query, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(metrics, "?name=b1")
	if code != http.StatusCreated {
		t.Fatalf("POST /backup: %d %s", code, body)
	}
	var got struct{ Path string }
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Path != filepath.Join(backups, "b1") {
		t.Fatalf("answer %q: %v", body, err)
	}
	cp, err := pebblestore.Open(got.Path, pebblestore.Options{Log: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.CheckInvariants(); err != nil {
		t.Errorf("the backup fails its check: %v", err)
	}
	if n := len(storedTasksOf(t, cp)); n != 5 {
		t.Errorf("the backup holds %d tasks, want 5", n)
	}
	cp.Close()
	if code, body := post(metrics, "?name=b1"); code != http.StatusConflict {
		t.Errorf("second backup of the same name: %d %s", code, body)
	}
	for _, name := range []string{"..", "../escape", "a/b", ".hidden"} {
		if code, body := post(metrics, "?name="+name); code != http.StatusBadRequest {
			t.Errorf("name %q: %d %s", name, code, body)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); !os.IsNotExist(err) {
		t.Errorf("a backup was written outside -backup-dir: %v", err)
	}
	if code, _ := post(ts.httpBase, "?name=b2"); code == http.StatusCreated {
		t.Error("the A2A listener took a backup")
	}
}

// TestBackupEndpointTakesOutbox (X1): with push delivery on Pebble, POST
// /backup checkpoints the push outbox beside the store's checkpoint (its
// directory with .push appended, where a2astore-admin restore finds it):
// the backup's outbox holds the configuration saved before it. A name
// whose outbox directory exists is refused (409).
func TestBackupEndpointTakesOutbox(t *testing.T) {
	dir := t.TempDir()
	backups := filepath.Join(dir, "backups")
	ts := startServer(t, config{Backend: "pebble", PebbleDir: filepath.Join(dir, "db"), BackupDir: backups, Push: pushOn})
	c := ts.clients[transports[0]]
	task := send(t, c, "", "hello")
	if _, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: task.ID, ID: "hook", URL: "https://hook.example/x"}); err != nil {
		t.Fatal(err)
	}
	post := func(name string) int {
		resp, err := http.Post("http://"+ts.metricsLn.Addr().String()+backupPath+"?name="+name, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("b1"); code != http.StatusCreated {
		t.Fatalf("POST /backup: %d", code)
	}
	cp, err := pebblestore.Open(filepath.Join(backups, "b1"), pebblestore.Options{Log: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	ob, err := pushdelivery.OpenPebble(filepath.Join(backups, "b1.push"), cp, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	recs, err := ob.List(t.Context(), task.ID, "", 10)
	if err != nil || len(recs) != 1 || recs[0].Config.URL != "https://hook.example/x" {
		t.Fatalf("the backup's outbox holds %v, %v; want the config saved before it", recs, err)
	}
	if err := os.MkdirAll(filepath.Join(backups, "b2.push"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code := post("b2"); code != http.StatusConflict {
		t.Errorf("a backup whose outbox directory exists: %d, want 409", code)
	}
	if _, err := os.Stat(filepath.Join(backups, "b2")); !os.IsNotExist(err) {
		t.Errorf("the refused backup wrote %s: %v", filepath.Join(backups, "b2"), err)
	}
}

// TestBackupDirRefused: -backup-dir over a backend that takes no
// checkpoints, or without the metrics listener that serves them, stops
// the server from starting with a message saying why.
func TestBackupDirRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  config
		want string
	}{
		{config{Backend: "mem", BackupDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0"}, "needs -backend pebble"},
		{config{Backend: "pebble", PebbleDir: t.TempDir(), BackupDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"}, "needs the metrics listener"},
	} {
		s, err := newServer(t.Context(), c.cfg)
		if err == nil {
			_ = s.shutdown(t.Context())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.cfg.Backend, err, c.want)
		}
	}
}
