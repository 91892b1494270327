package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pebblestore"
)

// childEnv, when set, makes the test binary run the server (its value is
// the JSON array of arguments) instead of the tests: the shutdown tests
// signal a real process.
const childEnv = "A2ASTORE_SERVER_CHILD_ARGS"

// childMain runs the server as main does.
func childMain(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, "child args:", err)
		return 2
	}
	err := run(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "a2astore-server:", err)
	}
	return exitCode(err)
}

// child is a server process started from the test binary.
type child struct {
	cmd  *exec.Cmd
	base string // http://host:port of the A2A HTTP listener
	mu   sync.Mutex
	log  strings.Builder
	done chan error // the process's exit
}

var servingHTTP = regexp.MustCompile(`msg=serving .*\bhttp=(\S+)`)

// spawn starts the server with args as a process of the test binary (it
// dies with the binary) and waits until it logs that it serves, at most
// two minutes. It reports failure as an error, so it may run on any
// goroutine. Without a -drain-delay in args the server stops at once on
// SIGTERM (-drain-delay 0): only the drain's own tests wait for it.
func spawn(args ...string) (*child, error) {
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-drain-delay") }) {
		args = append([]string{"-drain-delay", "0"}, args...)
	}
	argsJSON, _ := json.Marshal(args)
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(argsJSON))
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.log.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if m := servingHTTP.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		c.done <- c.cmd.Wait()
		close(serving)
	}()
	select {
	case addr, ok := <-serving:
		if !ok {
			return nil, fmt.Errorf("server exited before serving:\n%s", c.logs())
		}
		c.base = "http://" + addr
		return c, nil
	case <-time.After(2 * time.Minute):
		_ = c.cmd.Process.Kill()
		return nil, fmt.Errorf("server did not start serving within 2 minutes:\n%s", c.logs())
	}
}

// startChild starts the server with args and waits until it serves; it is
// killed at t's cleanup unless it has exited.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c, err := spawn(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *child) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// stop sends sig and returns the exit error (nil: exit code 0).
func (c *child) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return <-c.done
}

// sendNonBlocking sends non-blocking (returnImmediately) messages over JSON-RPC from
// workers until stop is closed and then until the server stops answering.
// It returns the IDs of the acknowledged tasks once every worker is done.
func sendNonBlocking(t *testing.T, base string, acked chan<- a2a.TaskID, stop <-chan struct{}) func() []a2a.TaskID {
	t.Helper()
	card := fetchAgentCard(t, base)
	c, err := a2aclient.NewFromCard(t.Context(), card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ids []a2a.TaskID
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{
					Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work")),
					Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
				})
				if err != nil {
					select {
					case <-stop:
						return // the server is going away
					default:
						t.Errorf("SendMessage under load: %v", err)
						return
					}
				}
				id := res.(*a2a.Task).ID
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				select {
				case acked <- id:
				default:
				}
			}
		})
	}
	return func() []a2a.TaskID {
		wg.Wait()
		_ = c.Destroy()
		return ids
	}
}

func fetchAgentCard(t *testing.T, base string) *a2a.AgentCard {
	t.Helper()
	var card a2a.AgentCard
	getJSON(t, base+a2asrv.WellKnownAgentCardPath, &card)
	return &card
}

// storedTasks opens the Pebble directory directly (no server, so nothing
// is finished on open) and returns every task by ID.
func storedTasks(t *testing.T, dir string) map[a2a.TaskID]*a2a.Task {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return storedTasksOf(t, s)
}

// storedTasksOf returns every task of s by ID.
func storedTasksOf(t *testing.T, s engine.Store) map[a2a.TaskID]*a2a.Task {
	t.Helper()
	tasks := map[a2a.TaskID]*a2a.Task{}
	req := &engine.ListRequest{PageSize: engine.MaxPageSize}
	for {
		resp, err := s.List(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range resp.Tasks {
			tasks[task.ID] = task
		}
		if resp.NextPageToken == "" {
			return tasks
		}
		req.PageToken = resp.NextPageToken
	}
}

// checkFinished fails unless every stored task is terminal and every
// acknowledged task is stored; it returns the stored tasks by final state
// and status message.
func checkFinished(t *testing.T, dir string, acked []a2a.TaskID) map[string]int {
	t.Helper()
	tasks := storedTasks(t, dir)
	for _, id := range acked {
		if tasks[id] == nil {
			t.Errorf("acknowledged task %s lost", id)
		}
	}
	outcomes := map[string]int{}
	for id, task := range tasks {
		st := task.Status
		if !st.State.Terminal() {
			t.Errorf("task %s left %s", id, st.State)
		}
		key := string(st.State)
		if st.Message != nil && len(st.Message.Parts) > 0 {
			key += ": " + st.Message.Parts[0].Text()
		}
		outcomes[key]++
	}
	return outcomes
}

// TestShutdownUnderLoad (finding 8): SIGTERM while clients keep sending
// non-blocking messages. The server stops accepting, waits for the running
// agents, exits 0, and on the same Pebble directory no task is left
// submitted or working: with a short agent every task completes; with
// agents that outlast the shutdown timeout every task they held is failed
// with a status message saying why. Checked by making shutdown skip the
// executions (Wait and Abort): tasks are left working.
func TestShutdownUnderLoad(t *testing.T) {
	for _, c := range []struct {
		name, think, timeout string
		want                 string // the only outcome allowed
	}{
		{"agents finish", "5ms", "1m", string(a2a.TaskStateCompleted)},
		{"agents outlast the timeout", "1h", "200ms", string(a2a.TaskStateFailed) + ": " + shutdownReason},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := startChild(t, "-backend", "pebble", "-pebble-dir", dir, "-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0",
				"-metrics", "", "-status-updates", "2", "-think-time", c.think, "-shutdown-timeout", c.timeout)
			acks, stop := make(chan a2a.TaskID, 1), make(chan struct{})
			wait := sendNonBlocking(t, srv.base, acks, stop)
			for range 40 {
				<-acks
			}
			close(stop)
			if err := srv.stop(t, syscall.SIGTERM); err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, srv.logs())
			}
			acked := wait()
			outcomes := checkFinished(t, dir, acked)
			if len(outcomes) != 1 || outcomes[c.want] < len(acked) {
				t.Errorf("outcomes %v of %d acknowledged tasks; want all %q", outcomes, len(acked), c.want)
			}
		})
	}
}

// TestRestartAfterKill (finding 8): the server is killed (SIGKILL) while
// its agents work; started again on the same directory, it finishes every
// task the dead run left working, with a status message saying why,
// before it serves. Checked by starting with -finish-abandoned=false: the
// tasks stay working.
func TestRestartAfterKill(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-backend", "pebble", "-pebble-dir", dir, "-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0",
		"-metrics", "", "-status-updates", "2", "-think-time", "1h", "-shutdown-timeout", "200ms"}
	srv := startChild(t, args...)
	acks, stop := make(chan a2a.TaskID, 1), make(chan struct{})
	wait := sendNonBlocking(t, srv.base, acks, stop)
	for range 20 {
		<-acks
	}
	close(stop)
	var exit *exec.ExitError
	if err := srv.stop(t, syscall.SIGKILL); !errors.As(err, &exit) {
		t.Fatalf("kill: %v", err)
	}
	acked := wait()

	again := startChild(t, args...)
	if !strings.Contains(again.logs(), "finished tasks a previous run left unfinished") {
		t.Errorf("restart does not say it finished abandoned tasks:\n%s", again.logs())
	}
	if err := again.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, again.logs())
	}
	outcomes := checkFinished(t, dir, acked)
	want := string(a2a.TaskStateFailed) + ": " + abandonedReason
	if len(outcomes) != 1 || outcomes[want] < len(acked) {
		t.Errorf("outcomes %v of %d acknowledged tasks; want all %q", outcomes, len(acked), want)
	}
}

// atSize returns a working task of the given ID whose engine.TaskShape is
// exactly size bytes: a user message padded to fit, and, with statusMsg,
// an agent status message. Without it, the task is submitted and has no
// status timestamp.
func atSize(t *testing.T, id a2a.TaskID, size int, statusMsg bool) *a2a.Task {
	t.Helper()
	task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if statusMsg {
		now := time.Now().UTC()
		task.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now,
			Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("step 1"))}
	}
	user := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(""))
	task.History = []*a2a.Message{user}
	user.Parts[0] = a2a.NewTextPart(strings.Repeat("a", size-engine.TaskShape(task).Bytes))
	if got := engine.TaskShape(task).Bytes; got != size {
		t.Fatalf("task %s measures %d bytes, want %d", id, got, size)
	}
	return task
}

// TestRestartPastLimits (review of #14, finding 1): on start the server
// finishes the tasks a dead run left working even when the FAILED status
// message does not fit the store's limits: a task exactly at
// -max-task-bytes is failed without the message (a submitted one without
// a timestamp too), a task stored before -max-depth was lowered (which no
// write can fit any more) is logged and left as it is, and neither stops
// the server from starting nor the other tasks from being finished.
// Checked against the former finishTask, which always added the message
// and returned the first error: newServer failed with "task larger than
// MaxTaskBytes".
func TestRestartPastLimits(t *testing.T) {
	const maxBytes, maxDepth = 64 << 10, 5
	dir := t.TempDir()
	old, err := pebblestore.Open(dir, pebblestore.Options{Limits: engine.Limits{MaxTaskBytes: maxBytes}})
	if err != nil {
		t.Fatal(err)
	}
	deep := atSize(t, "deep", 1000, true)
	deep.Metadata = map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": map[string]any{"e": map[string]any{"f": true}}}}}}
	tasks := []*a2a.Task{
		atSize(t, "plain-1", 1000, true),
		atSize(t, "full-working", maxBytes, true),
		deep,
		atSize(t, "full-submitted", maxBytes, false),
		atSize(t, "plain-2", 1000, true),
	}
	for _, task := range tasks {
		if _, err := old.Create(t.Context(), task); err != nil {
			t.Fatalf("seed %s: %v", task.ID, err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	logs := &syncBuffer{}
	cfg := config{Backend: "pebble", PebbleDir: dir, FinishAbandoned: true,
		Limits: engine.Limits{MaxTaskBytes: maxBytes, MaxDepth: maxDepth},
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	ts := startServer(t, cfg)
	for _, task := range tasks {
		rec, err := ts.backend.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.Task
		if task.ID == "deep" {
			if got.Status.State != a2a.TaskStateWorking || !strings.Contains(logs.String(), "task=deep") {
				t.Errorf("task past the lowered depth limit: %s; want it left working and logged:\n%s", got.Status.State, logs.String())
			}
			continue
		}
		if got.Status.State != a2a.TaskStateFailed {
			t.Errorf("task %s left %s", task.ID, got.Status.State)
		}
		if len(got.History) == 0 || got.History[0].ID != task.History[0].ID || got.History[0].Parts[0].Text() != task.History[0].Parts[0].Text() {
			t.Errorf("task %s lost its user message", task.ID)
		}
		withReason := got.Status.Message != nil && got.Status.Message.Parts[0].Text() == abandonedReason
		if strings.HasPrefix(string(task.ID), "plain") != withReason {
			t.Errorf("task %s: status message %+v; want the reason only where it fits", task.ID, got.Status.Message)
		}
	}
	if !strings.Contains(logs.String(), "tasks=4") {
		t.Errorf("the log does not say 4 tasks were finished:\n%s", logs.String())
	}
	// The server serves: the task left working is listed over gRPC too.
	resp, err := ts.clients[a2a.TransportProtocolGRPC].ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil || resp.TotalSize != len(tasks) {
		t.Errorf("gRPC ListTasks after the restart: %+v, %v", resp, err)
	}
}

// TestShutdownStalledGRPC (review of #14, finding 3): a gRPC call that has
// not delivered its request does not hold shutdown: the server cancels it
// at once and stops without reaching its timeout, though the call's own
// read timeout is a minute away. Checked by making GRPCServer.GracefulStop
// skip the drain: shutdown waits for its whole timeout ("shutdown
// timeout" logged), then cuts the connection.
func TestShutdownStalledGRPC(t *testing.T) {
	logs := &syncBuffer{}
	ts := startServer(t, config{Backend: "mem", Serve: a2aserver.ServeLimits{ReadTimeout: time.Minute},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c := stallGRPC(t, ts.grpcLn.Addr().String(), false)
	for ts.grpcSrv.Receiving() == 0 {
		time.Sleep(5 * time.Millisecond) // a poll of the condition: the call reached the server
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := ts.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("shutdown took %v", time.Since(start))
	if strings.Contains(logs.String(), "shutdown timeout") {
		t.Errorf("shutdown waited for a call that never delivered its request:\n%s", logs.String())
	}
	how := c.end(5 * time.Second)
	t.Logf("%s after %v", how, time.Since(start))
	if how == "" {
		t.Error("the stalled call is still open after shutdown")
	}
}
