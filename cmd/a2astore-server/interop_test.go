package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// interopDir holds the JavaScript interop check (package.json, the
// committed package-lock.json pinning @a2a-js/sdk, interop.mjs).
var interopDir = filepath.Join("..", "..", "interop", "js")

// interopBound bounds the node run.
const interopBound = time.Minute

// TestInteropJS runs the official A2A JavaScript SDK (interop/js) against
// a staging server on loopback — owner policy, the caller identity in
// X-A2astore-Caller, an agent that holds tasks whose message is "hold"
// until they are canceled — over JSON-RPC, HTTP+JSON and gRPC: agent
// card and its caching, sends, gets, traversals (also switching transport
// on every page), filters, error codes (W3, W6, W7, W10), cancel,
// subscribe, owner isolation, version refusal (W8), push-config calls the
// card does not declare, SendMessage's historyLength.
// It fails when the script reports a failed check. Without node or
// without interop/js/node_modules (`cd interop/js && npm ci`) it skips,
// and fails under CI=true. Hermetic: node gets no proxy settings
// (@grpc/grpc-js sends even a loopback target through http_proxy), which
// the test checks by setting dead ones; without interopEnv every gRPC
// check fails.
func TestInteropJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(interopDir, "node_modules", "@a2a-js", "sdk"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the JavaScript interop check needs node and interop/js/node_modules (npm ci): %v", err)
		}
		t.Skipf("no node or no interop/js/node_modules (cd interop/js && npm ci): %v", err)
	}
	for _, k := range []string{"http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		t.Setenv(k, "http://127.0.0.1:9") // a dead proxy: port 9 (discard), nothing listens
	}
	t.Setenv("NODE_USE_ENV_PROXY", "1")
	release := make(chan struct{})
	s := startServer(t, config{
		Backend: "mem", Policy: "owner", CallerHeader: callerHeader,
		Agent: agentConfig{StatusUpdates: 1, HistoryMessages: 1, beforeComplete: func(ctx context.Context, execCtx *a2asrv.ExecutorContext) {
			if execCtx.Message == nil || len(execCtx.Message.Parts) == 0 || execCtx.Message.Parts[0].Text() != "hold" {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}},
	})
	t.Cleanup(func() { close(release) }) // before the server's shutdown

	ctx, cancel := context.WithTimeout(t.Context(), interopBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "interop.mjs")
	cmd.Dir = interopDir
	cmd.Env = append(interopEnv(os.Environ()), "A2A_URL="+s.httpBase, "A2A_CALLER_HEADER="+callerHeader)
	cmd.WaitDelay = time.Second // a child of node holding the output cannot outlast the bound
	out, err := cmd.CombinedOutput()
	t.Logf("node interop.mjs:\n%s", out)
	if ctx.Err() != nil {
		t.Fatalf("the interop check did not finish within %v", interopBound)
	}
	if err != nil {
		t.Fatalf("the interop check failed: %v", err)
	}
	// W8: every call the SDK made named A2A-Version 1.0 (no call relied
	// on the server serving a call without one as 1.0), and the script's
	// deliberate 99.0 calls — a send and a stream per transport — were
	// refused.
	version := func(v string) float64 { return counter(t, s, "a2astore_protocol_version_calls_total", "version", v) }
	if version("none") != 0 || version("1.0") == 0 || version("unsupported") != 2*float64(len(transports)) {
		t.Errorf("calls by A2A-Version: none %v, 1.0 %v, unsupported %v; want 0, > 0, %d", version("none"), version("1.0"), version("unsupported"), 2*len(transports))
	}
}

// interopEnv is env without the proxy settings node or its packages
// follow: the check talks to the server on loopback only.
func interopEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "grpc_proxy", "all_proxy", "no_proxy", "no_grpc_proxy", "node_use_env_proxy":
			continue
		}
		out = append(out, kv)
	}
	return out
}
