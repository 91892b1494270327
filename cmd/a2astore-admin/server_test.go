package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/pebblestore"
)

var servingLine = regexp.MustCompile(`msg=serving .*\bhttp=(\S+) .*\bmetrics=http://(\S+)/metrics`)

// startServerBinary builds a2astore-server and runs it with args until the
// test ends; it returns the HTTP and metrics listeners' addresses.
func startServerBinary(t *testing.T, args ...string) (httpAddr, metricsAddr string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "a2astore-server")
	if out, err := exec.Command("go", "build", "-o", bin, "../a2astore-server").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0", "-metrics", "127.0.0.1:0", "-drain-delay", "0"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	serving := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case m := <-serving:
		return m[1], m[2]
	case <-exited:
		t.Fatal("the server exited before serving")
	case <-time.After(2 * time.Minute):
		t.Fatal("the server did not serve within 2 minutes")
	}
	return "", ""
}

// TestBackupOfRunningServer (X1): a2astore-admin backup -server takes a
// checkpoint of a running server's Pebble store while clients send
// messages; restore puts it in a new directory and check passes there;
// every task acknowledged before the backup began is in it.
func TestBackupOfRunningServer(t *testing.T) {
	dir := t.TempDir()
	backups := filepath.Join(dir, "backups")
	httpAddr, metricsAddr := startServerBinary(t, "-backend", "pebble", "-pebble-dir", filepath.Join(dir, "db"), "-backup-dir", backups,
		"-status-updates", "1")
	resp, err := http.Get("http://" + httpAddr + a2asrv.WellKnownAgentCardPath)
	if err != nil {
		t.Fatal(err)
	}
	var card a2a.AgentCard
	err = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), &card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()

	var mu sync.Mutex
	var acked []a2a.TaskID
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{
					Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work"))})
				if err != nil {
					t.Errorf("SendMessage: %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, res.(*a2a.Task).ID)
				mu.Unlock()
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for count() < 30 && !t.Failed() {
		_, _ = http.Get("http://" + httpAddr + "/healthz") // a request between polls of the condition
	}
	mu.Lock()
	before := append([]a2a.TaskID(nil), acked...)
	mu.Unlock()
	code, out, errOut := admin(t, "backup", "-server", "http://"+metricsAddr, "-name", "live")
	n := count()
	for count() < n+20 && !t.Failed() {
		_, _ = http.Get("http://" + httpAddr + "/healthz")
	}
	close(stop)
	wg.Wait()
	if code != exitOK || !strings.Contains(out, filepath.Join(backups, "live")) {
		t.Fatalf("backup -server: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := admin(t, "backup", "-server", "http://"+metricsAddr, "-name", "live"); code != exitUsage || !strings.Contains(errOut, "exists") {
		t.Errorf("a second backup of the same name: %d %s", code, errOut)
	}
	restored := filepath.Join(dir, "restored")
	if code, out, errOut := admin(t, "restore", "-from", filepath.Join(backups, "live"), "-pebble-dir", restored); code != exitOK {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := admin(t, "check", "-backend", "pebble", "-pebble-dir", restored); code != exitOK {
		t.Fatalf("check of the restored backup: %d %s %s", code, out, errOut)
	}
	s, err := pebblestore.Open(restored, pebblestore.Options{Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range before {
		if _, err := s.Get(t.Context(), id); err != nil {
			t.Errorf("task %s, acknowledged before the backup, in the restored store: %v", id, err)
		}
	}
	t.Logf("%d tasks acknowledged before the backup, %d in all", len(before), count())
}
