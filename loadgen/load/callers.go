package load

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// callers are a run's caller identities (Config.Caller, Config.Callers):
// none, one, or one per context. Each context belongs to one caller, who
// creates, reads, changes and lists its tasks, so every task is used by its
// owner only.
type callers struct {
	names []string
	owner sync.Map // a2a.TaskID → its creator, when there are several
}

func newCallers(cfg *Config) *callers {
	c := new(callers)
	switch {
	case cfg.Callers > 1:
		name := cmp.Or(cfg.Caller, "loadgen")
		for i := range cfg.Callers {
			c.names = append(c.names, fmt.Sprintf("%s-%d", name, i+1))
		}
	case cfg.Caller != "":
		c.names = []string{cfg.Caller}
	}
	return c
}

// any reports whether the run has caller identities.
func (c *callers) any() bool { return len(c.names) > 0 }

// forContext returns the identity that owns contextID (its tasks and
// lists), "" for none; "" (every context) is the first caller's.
func (c *callers) forContext(contextID string) string {
	switch {
	case len(c.names) == 0:
		return ""
	case len(c.names) == 1 || contextID == "":
		return c.names[0]
	}
	h := fnv.New32a()
	h.Write([]byte(contextID))
	return c.names[h.Sum32()%uint32(len(c.names))]
}

// created records that caller created task id.
func (c *callers) created(id a2a.TaskID, caller string) {
	if len(c.names) > 1 {
		c.owner.Store(id, caller)
	}
}

// ofTask returns the identity that created task id (the first caller's
// for a task it does not know).
func (c *callers) ofTask(id a2a.TaskID) string {
	if v, ok := c.owner.Load(id); ok {
		return v.(string)
	}
	return c.forContext("")
}
