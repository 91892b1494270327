package a2aserver

import (
	"bytes"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protov2 "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fieldsCodec is gRPC's proto codec with a bound on the fields of a
// request message, counted on the wire at every level of nesting before
// the message is decoded. Decoding costs per field, not per byte: a part
// without content is 2 bytes on the wire and about 140 decoded, so a
// 4 MiB SendMessage of 2 million of them allocated 300 MB (75 times its
// size), most of it live, before a2a-go's conversion refused the first.
// A message over the bound is not decoded: the codec marks it
// (overFieldsMark), and the interceptors of grpcCalls (installed with
// it) answer INVALID_ARGUMENT before any handler or other interceptor
// sees the empty message.
type fieldsCodec struct {
	encoding.CodecV2
	max int // negative: no bound
}

func newFieldsCodec(max int) fieldsCodec {
	return fieldsCodec{CodecV2: encoding.GetCodecV2(proto.Name), max: max}
}

// overFieldsMark is what fieldsCodec leaves in a request message it does
// not decode: the message's unknown fields, alone (field 2^29-1, a
// marker text), for the interceptor to find (tooManyFields). A mark on
// the message itself, not a table beside it, is gone with the message
// whatever happens to the call. A client that sends exactly these
// unknown bytes itself is refused the same way.
var overFieldsMark = protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), "a2aserver: too many fields")

func (c fieldsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(protov2.Message)
	// A field takes at least 2 bytes on the wire: a smaller message
	// cannot have more than max.
	if !ok || c.max < 0 || data.Len() <= 2*c.max {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	n := c.max
	if !countFields(buf.ReadOnlyData(), m.ProtoReflect().Descriptor(), &n, 0) {
		m.ProtoReflect().SetUnknown(overFieldsMark)
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// maxScanDepth is where countFields stops descending: protobuf's own
// decoder refuses nesting past 10,000 levels.
const maxScanDepth = 10000

// countFields takes the fields of b, a message of type md, and of the
// messages nested in it, off *left, and reports whether *left stayed
// non-negative. Malformed wire data ends the count (true): the decoder
// refuses it.
func countFields(b []byte, md protoreflect.MessageDescriptor, left *int, depth int) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return true
		}
		b = b[n:]
		if *left--; *left < 0 {
			return false
		}
		if typ == protowire.BytesType && depth < maxScanDepth {
			if fd := md.Fields().ByNumber(num); fd != nil && fd.Message() != nil {
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return true
				}
				if !countFields(v, fd.Message(), left, depth+1) {
					return false
				}
				b = b[n:]
				continue
			}
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return true
		}
		b = b[n:]
	}
	return true
}

// tooManyFields returns the error of a request message fieldsCodec left
// undecoded, else nil.
func tooManyFields(req any) error {
	m, ok := req.(protov2.Message)
	if ok && bytes.Equal(m.ProtoReflect().GetUnknown(), overFieldsMark) {
		return grpcA2AError(codes.InvalidArgument, a2a.ErrInvalidParams, msgTooManyFields)
	}
	return nil
}
