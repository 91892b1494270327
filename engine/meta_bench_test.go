package engine

import (
	"encoding/json"
	"testing"
)

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
