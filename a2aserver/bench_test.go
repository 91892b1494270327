package a2aserver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
)

// BenchmarkList measures what the adapter and the metrics decorator add to
// one 50-task page of the in-memory store (total included, as the adapter
// always asks for it).
func BenchmarkList(b *testing.B) {
	store := memstore.New(memstore.Options{})
	for i := range 10000 {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("task-%05d", i)), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := store.Create(b.Context(), task); err != nil {
			b.Fatal(err)
		}
	}
	metered := storemetrics.New(store, storemetrics.Options{Backend: "mem"})
	b.Run("backend=mem/layer=engine/page=50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.List(b.Context(), &engine.ListRequest{PageSize: 50, IncludeTotalSize: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backend=mem/layer=metrics/page=50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := metered.List(b.Context(), &engine.ListRequest{PageSize: 50, IncludeTotalSize: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, s := range map[string]engine.Store{"adapter": store, "adapter+metrics": metered} {
		ts := TaskStore(s)
		b.Run("backend=mem/layer="+name+"/page=50", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ts.List(b.Context(), &a2a.ListTasksRequest{PageSize: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJSONRPCParamsCompat: the wrapper's own cost on a valid request
// (JSONRPCParamsCompat around a handler that drains the body and writes a
// fixed success answer, as a2a-go's would), per method: what a served
// JSON-RPC call pays for the compatibility layer on its success path.
func BenchmarkJSONRPCParamsCompat(b *testing.B) {
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tasks":[],"nextPageToken":"","pageSize":50,"totalSize":0}}` + "\n")
	h := JSONRPCParamsCompat(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	for _, c := range []struct{ method, params string }{
		{"ListTasks", `{"pageSize":50,"historyLength":0,"includeArtifacts":false}`},
		{"SendMessage", `{"message":{"messageId":"0192a3b4-c5d6-47e8-9f01-23456789abcd","role":"ROLE_USER","parts":[{"text":"a short request of some length to look like a real one"}],"metadata":{"k":"v"}},"configuration":{"historyLength":0}}`},
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + c.method + `","params":` + c.params + `}`
		b.Run("method="+c.method, func(b *testing.B) {
			b.ReportAllocs()
			w := httptest.NewRecorder()
			for b.Loop() {
				w.Body.Reset()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
			}
		})
	}
}
