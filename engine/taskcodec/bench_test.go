package taskcodec

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/internal/taskgen"
)

// benchTask is a generated 1 KB task: 3 history messages, one 256-byte
// artifact.
func benchTask() *a2a.Task { return taskgen.New(taskgen.Shape{}).Task(1) }

// BenchmarkTaskDecode: a stored task into a fresh *a2a.Task, the codec vs
// encoding/json (the stored form before the codec).
func BenchmarkTaskDecode(b *testing.B) {
	t := benchTask()
	bin, err := EncodeTask(t)
	if err != nil {
		b.Fatal(err)
	}
	js, _ := json.Marshal(t)
	b.Run("codec=binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeTask(bin); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(bin)), "bytes/task")
	})
	b.Run("codec=json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t a2a.Task
			if err := json.Unmarshal(js, &t); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(js)), "bytes/task")
	})
}

// BenchmarkTaskEncode: a task into its stored form, the codec vs
// encoding/json.
func BenchmarkTaskEncode(b *testing.B) {
	t := benchTask()
	b.Run("codec=binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeTask(t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(t); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Light pages decode each task's metadata; an owner policy puts one key in
// every task. Binary value form vs encoding/json on the same map.
var benchMeta = map[string]any{"a2astore.owner": "alice", "labels": []any{"a", "b"}, "priority": 3.0}

func BenchmarkMetadataDecode(b *testing.B) {
	bin, _ := EncodeMetadata(benchMeta)
	js, _ := json.Marshal(benchMeta)
	b.Run("codec=binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeMetadata(bin); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(js, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
