package engine_test

import (
	"errors"
	"fmt"

	"github.com/a2astore/a2astore/engine"
)

// A page token is an opaque, versioned encoding of one cursor (T2, T3):
// stores hand it out in NextPageToken and clients copy it back unchanged.
// Every token a store cannot use — the old offset tokens such as "50"
// included — is the same ErrInvalidPageToken, an ErrInvalidArgument (T4).
func ExampleDecodeToken() {
	token := engine.EncodeToken(engine.Cursor{UpdatedAt: 1767225600000000, ID: "task-7"})
	c, err := engine.DecodeToken(token)
	fmt.Println(c.UpdatedAt, c.ID, err)

	_, err = engine.DecodeToken("50")
	fmt.Println(errors.Is(err, engine.ErrInvalidPageToken), errors.Is(err, engine.ErrInvalidArgument))
	// Output:
	// 1767225600000000 task-7 <nil>
	// true true
}
