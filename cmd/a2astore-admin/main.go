// Command a2astore-admin runs the store's lifecycle operations (SPEC X1)
// on a Pebble directory or a PostgreSQL database:
//
//	a2astore-admin check -backend pebble -pebble-dir DIR
//	a2astore-admin check -backend pg -pg-dsn DSN
//	a2astore-admin migrate status -pg-dsn DSN
//	a2astore-admin migrate up -pg-dsn DSN
//	a2astore-admin counts rebuild -pg-dsn DSN
//	a2astore-admin backup -pebble-dir DIR -to BACKUP
//	a2astore-admin backup -server http://127.0.0.1:9464 [-name NAME]
//	a2astore-admin restore -from BACKUP -pebble-dir DIR
//	a2astore-admin copy -from pebble -from-pebble-dir DIR -to pg -to-pg-dsn DSN
//
// check verifies every invariant the backend can (engine.Checker: the
// keyspace or rows, the counters against a recount, the task log against
// its tasks; on PostgreSQL also push configurations whose task is gone)
// and exits 1 with a report when one fails. On PostgreSQL it changes
// nothing and runs beside servers; Pebble allows one process per
// directory, so check a backup of a running server's store. backup takes
// a Pebble checkpoint: of a directory no server holds, or, with -server,
// through the running server's metrics listener (a2astore-server
// -backup-dir). restore copies a backup into an empty directory and
// checks it there. copy moves every task between two persistent backends
// exactly as stored — order, revisions, owners, content, logs and push
// configurations — resumes where a stopped copy ended, and verifies the
// target against the source by traversing both (copy.go). Bad input — an
// unknown command or backend, a missing flag, a target that is not empty
// (nor a copy of the source to resume), a source being written to during
// a copy without -live — exits 2 with a message and changes nothing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK       = 0
	exitProblems = 1 // check found a problem, or an operation failed
	exitUsage    = 2 // bad input: nothing was changed
)

// usageError is bad input: the command changes nothing and exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// A command is one operation: its name (with its verb), what it does, its
// flags, and its body.
type command struct {
	name  string
	about string
	flags func(*flag.FlagSet, *options)
	run   func(ctx context.Context, o *options, out io.Writer) error
}

// options are every command's flags; each command registers those it reads.
type options struct {
	backend, pebbleDir, pgDSN, pgSchema string
	to, from, server, name, pushDir     string
	log                                 bool
	src, dst                            endpoint // copy
	batch                               int      // copy
	live                                bool     // copy
}

func backendFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.backend, "backend", "", "store: pebble (needs -pebble-dir) or pg (needs -pg-dsn)")
	fs.StringVar(&o.pebbleDir, "pebble-dir", "", "Pebble data directory")
	pgFlags(fs, o)
}

func pgFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.pgDSN, "pg-dsn", "", "PostgreSQL connection string")
	fs.StringVar(&o.pgSchema, "pg-schema", "public", "PostgreSQL schema holding a2a_tasks")
}

var commands = []command{
	{"check", "verify every invariant the backend can; exit 1 with a report when one fails", backendFlags, runCheck},
	{"migrate status", "PostgreSQL: which migrations the schema holds; exit 1 when one that a store of this build requires is missing (with -log, the default: every a2astore-server's, which keeps the task log)", func(fs *flag.FlagSet, o *options) {
		pgFlags(fs, o)
		fs.BoolVar(&o.log, "log", true, "judge the schema for a store with the task log, as every a2astore-server opens (false: a program opening pgstore without Options.Log)")
	}, runMigrateStatus},
	{"migrate up", "PostgreSQL: apply every missing migration (what a server does on start)", func(fs *flag.FlagSet, o *options) {
		pgFlags(fs, o)
		fs.BoolVar(&o.log, "log", true, "create the task log's table, deletions and trace column too (005, 008, 010: every a2astore-server keeps the log)")
	}, runMigrateUp},
	{"counts rebuild", "PostgreSQL: recount every task counter from the table (the repair of a counter drift)", pgFlags, runCountsRebuild},
	{"backup", "Pebble: a consistent checkpoint, of a directory no server holds (-pebble-dir, -to) or of a running server (-server); the push outbox goes beside it, in the backup's directory with .push appended", func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.pebbleDir, "pebble-dir", "", "Pebble data directory no server holds")
		fs.StringVar(&o.pushDir, "push-dir", "", "the store's push outbox directory, backed up when it exists (default: -pebble-dir with .push appended, as a2astore-server)")
		fs.StringVar(&o.to, "to", "", "directory to create for the backup (must not exist, nor the same with .push appended)")
		fs.StringVar(&o.server, "server", "", "base URL of a running a2astore-server's metrics listener (its -metrics address, with -backup-dir set)")
		fs.StringVar(&o.name, "name", "", "with -server: the backup's name under the server's -backup-dir (default: a2astore-<UTC time>)")
	}, runBackup},
	{"restore", "Pebble: copy a backup (and its push outbox, when it has one) into an empty directory and check it there", func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.from, "from", "", "backup directory (made by backup)")
		fs.StringVar(&o.pebbleDir, "pebble-dir", "", "Pebble data directory to restore into: missing or empty")
		fs.StringVar(&o.pushDir, "push-dir", "", "directory to restore the backup's push outbox into: missing or empty (default: -pebble-dir with .push appended, as a2astore-server)")
	}, runRestore},
	{"copy", "every task, in list order and exactly as stored, from one persistent backend into another: empty, or a copy of the source that stopped (resumed); verified at the end", copyFlags, runCopy},
}

// flagSet is cmd's flag set over o.
func (c *command) flagSet(o *options, errOut io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("a2astore-admin "+c.name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	c.flags(fs, o)
	return fs
}

// usage prints every command with its flags.
func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: a2astore-admin COMMAND [flags]")
	fmt.Fprintln(w, "\nExit status: 0 ok, 1 a check found a problem or the operation failed, 2 bad input (nothing changed).")
	for i := range commands {
		c := &commands[i]
		fmt.Fprintf(w, "\n%s: %s\n", c.name, c.about)
		fs := c.flagSet(&options{}, w)
		fs.PrintDefaults()
	}
}

// run runs the command named by args and returns the exit status.
func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(errOut)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	var c *command
	for i := range commands {
		words := strings.Fields(commands[i].name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == commands[i].name {
			c = &commands[i]
			args = args[len(words):]
			break
		}
	}
	if c == nil {
		fmt.Fprintf(errOut, "a2astore-admin: unknown command %q (want check, migrate status|up, counts rebuild, backup, restore or copy; -h lists them)\n", strings.Join(args[:min(2, len(args))], " "))
		return exitUsage
	}
	var o options
	fs := c.flagSet(&o, errOut)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errOut, "a2astore-admin %s: unexpected arguments %q\n", c.name, fs.Args())
		return exitUsage
	}
	err := c.run(ctx, &o, out)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(errOut, "a2astore-admin %s: %v\n", c.name, err)
		return exitUsage
	default:
		fmt.Fprintf(errOut, "a2astore-admin %s: %v\n", c.name, err)
		return exitProblems
	}
}
