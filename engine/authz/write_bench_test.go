package authz_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
)

// BenchmarkCheckedWrite: what a write through the dispatcher costs against
// the store's own, now that it is conditional on the version it checked
// (A9): via=raw is the store's AppendHistory, via=allowall the
// pass-through, via=admitall the checked path (Get, check, AppendHistoryIf
// on the revision read). Each op appends a new message to one of 1,024
// tasks, each task taking at most 64 before it is replaced by a fresh one
// (outside the timer), so histories stay short whatever b.N is.
func BenchmarkCheckedWrite(b *testing.B) {
	const tasks, perTask = 1024, 64
	for _, be := range benchBackends {
		for _, via := range []string{"raw", "allowall", "admitall"} {
			b.Run(fmt.Sprintf("backend=%s/op=append/via=%s", be.name, via), func(b *testing.B) {
				raw := be.open()
				var s engine.Store = raw
				switch via {
				case "allowall":
					s = authz.New(raw, authz.AllowAll{})
				case "admitall":
					s = authz.New(raw, admitAll)
				}
				ctx := context.Background()
				fresh := func(gen int) {
					for i := range tasks {
						id := a2a.TaskID("w" + strconv.Itoa(i))
						if gen > 0 {
							if err := raw.Delete(ctx, id); err != nil {
								b.Fatal(err)
							}
						}
						if _, err := raw.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
							b.Fatal(err)
						}
					}
				}
				fresh(0)
				n := 0
				b.ReportAllocs()
				for b.Loop() {
					if n > 0 && n%(tasks*perTask) == 0 {
						b.StopTimer()
						fresh(n)
						b.StartTimer()
					}
					id := a2a.TaskID("w" + strconv.Itoa(n%tasks))
					msg := &a2a.Message{ID: "m" + strconv.Itoa(n), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}
					if _, err := s.AppendHistory(ctx, id, msg); err != nil {
						b.Fatal(err)
					}
					n++
				}
			})
		}
	}
}
