package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestPprofOnMetricsListenerOnly: Go's profiles are served on the metrics
// (operators') listener and not on the A2A listener: a CPU profile or a
// goroutine dump shows every caller's traffic.
func TestPprofOnMetricsListenerOnly(t *testing.T) {
	ts := startServer(t, config{Backend: "mem"})
	metrics := *ts
	metrics.httpBase = "http://" + ts.metricsLn.Addr().String()
	for _, path := range []string{pprofPath, pprofPath + "cmdline", pprofPath + "goroutine?debug=1", pprofPath + "heap"} {
		if code, body := restGet(t, ts, path, nil); code == http.StatusOK || strings.Contains(string(body), "goroutine") || strings.Contains(string(body), "a2astore-server") {
			t.Errorf("GET %s on the A2A listener: %d %.200q; want no profile", path, code, body)
		}
		if code, body := restGet(t, &metrics, path, nil); code != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s on the metrics listener: %d %.200q", path, code, body)
		}
	}
	if _, body := restGet(t, &metrics, pprofPath, nil); !strings.Contains(string(body), "profile") || !strings.Contains(string(body), "goroutine") {
		t.Errorf("the metrics listener's %s index lists no profiles: %.300q", pprofPath, body)
	}
}
