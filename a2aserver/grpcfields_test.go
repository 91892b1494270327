package a2aserver

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestCountFields counts the fields at every level: the request's message
// (1), its ID and role (2), and per part the part (1), its text and
// metadata (2), the metadata's two map entries (2), their keys and values
// (4) and the values' numbers (2).
func TestCountFields(t *testing.T) {
	meta, err := structpb.NewStruct(map[string]any{"a": 1.0, "b": 2.0})
	if err != nil {
		t.Fatal(err)
	}
	req := &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER}}
	for range 10 {
		req.Message.Parts = append(req.Message.Parts, &a2apb.Part{Content: &a2apb.Part_Text{Text: "x"}, Metadata: meta})
	}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	const want = 1 + 2 + 10*(1+2+2+4+2)
	md := req.ProtoReflect().Descriptor()
	for _, c := range []struct {
		left int
		ok   bool
	}{{want, true}, {want - 1, false}} {
		left := c.left
		if ok := countFields(b, md, &left, 0); ok != c.ok || ok && left != 0 {
			t.Errorf("countFields with %d left: %v, %d left over; want %v (%d fields)", c.left, ok, left, c.ok, want)
		}
	}
	if n := testing.AllocsPerRun(10, func() { left := want; countFields(b, md, &left, 0) }); n != 0 {
		t.Errorf("countFields allocates %v times", n)
	}
}
