package taskcodec_test

import (
	"fmt"
	"log"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/taskcodec"
)

// A task's stored form and back. Backends keep the parts a light page
// skips (history, artifacts, the status message) apart with
// EncodeMessage, EncodeArtifacts and EncodeStatusMessage.
func ExampleEncodeTask() {
	task := &a2a.Task{
		ID:        "task-1",
		ContextID: "ctx-1",
		Status:    a2a.TaskStatus{State: a2a.TaskStateCompleted},
		History:   []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))},
		Metadata:  map[string]any{"priority": 2.0},
	}
	b, err := taskcodec.EncodeTask(task)
	if err != nil {
		log.Fatal(err)
	}
	back, err := taskcodec.DecodeTask(b)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(back.ID, back.ContextID, back.Status.State, len(back.History), back.Metadata["priority"])
	// Output:
	// task-1 ctx-1 TASK_STATE_COMPLETED 1 2
}
