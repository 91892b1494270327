package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPprofOnMetricsListenerOnly: Go's profiles are served on the metrics
// (operators') listener and not on the A2A listener: a CPU profile or a
// goroutine dump shows every caller's traffic.
func TestPprofOnMetricsListenerOnly(t *testing.T) {
	ts := startServer(t, config{Backend: "mem"})
	get := func(base, path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	metrics := "http://" + ts.metricsLn.Addr().String()
	for _, path := range []string{pprofPath, pprofPath + "cmdline", pprofPath + "goroutine?debug=1", pprofPath + "heap"} {
		if code, body := get(ts.httpBase, path); code == http.StatusOK || strings.Contains(body, "goroutine") || strings.Contains(body, "a2astore-server") {
			t.Errorf("GET %s on the A2A listener: %d %.200q; want no profile", path, code, body)
		}
		if code, body := get(metrics, path); code != http.StatusOK || body == "" {
			t.Errorf("GET %s on the metrics listener: %d %.200q", path, code, body)
		}
	}
	if _, body := get(metrics, pprofPath); !strings.Contains(body, "profile") || !strings.Contains(body, "goroutine") {
		t.Errorf("the metrics listener's %s index lists no profiles: %.300q", pprofPath, body)
	}
}
