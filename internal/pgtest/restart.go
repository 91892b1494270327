package pgtest

import (
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Restart stops the package's throwaway server (fast shutdown: every
// session is disconnected) and starts it again on the same port and data,
// for tests of what survives a database restart. It skips tb when the
// server is an existing one (A2ASTORE_PG_DSN), which tests must not
// restart. Other tests of the package running in parallel see the
// restart too: call it only from tests that do not run in parallel.
func Restart(tb testing.TB) {
	tb.Helper()
	if _, _, err := server(); err != nil {
		unavailable(tb, err)
	}
	mu.Lock()
	defer mu.Unlock()
	c := mu.cluster
	if c == nil {
		tb.Skip("pgtest: the server is " + EnvDSN + "'s; not restarting it")
	}
	if err := c.restart(); err != nil {
		tb.Fatalf("pgtest: restart: %v", err)
	}
}

// Halt stops the package's throwaway server (fast shutdown: every session
// is disconnected) and returns a function that starts it again on the same
// port and data, for tests of what a store does while its database is
// down; tb's cleanup starts it if the test did not. It skips tb as Restart
// does, with the same caveat: other tests of the package see the server
// down.
func Halt(tb testing.TB) (start func()) {
	tb.Helper()
	if _, _, err := server(); err != nil {
		unavailable(tb, err)
	}
	mu.Lock()
	c := mu.cluster
	var err error
	if c != nil {
		err = c.halt()
	}
	mu.Unlock()
	if c == nil {
		tb.Skip("pgtest: the server is " + EnvDSN + "'s; not stopping it")
	}
	if err != nil {
		tb.Fatalf("pgtest: halt: %v", err)
	}
	var once sync.Once
	start = func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if err := c.startAgain(); err != nil {
				tb.Fatalf("pgtest: start after halt: %v", err)
			}
		})
	}
	tb.Cleanup(start)
	return start
}

func (c *cluster) restart() error {
	if err := c.halt(); err != nil {
		return err
	}
	return c.startAgain()
}

// startAgain starts a halted server on its port and data.
func (c *cluster) startAgain() error {
	bin, err := binDir()
	if err != nil {
		return err
	}
	cred, err := runAs()
	if err != nil {
		return err
	}
	return c.start(bin, filepath.Join(c.dir, "data"), cred)
}

// halt stops the server with a fast shutdown (SIGINT), killing it when it
// has not stopped within a minute.
func (c *cluster) halt() error {
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return err
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(time.Minute):
		c.kill()
		return errors.New("postgres did not stop within a minute; killed")
	}
}
