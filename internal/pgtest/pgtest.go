package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable holding the DSN of an existing
// server; EnvBin names the directory of PostgreSQL binaries to use.
const (
	EnvDSN = "A2ASTORE_PG_DSN"
	EnvBin = "A2ASTORE_PG_BIN"
)

// startTimeout bounds initdb plus server start-up.
const startTimeout = 2 * time.Minute

var (
	mainCalled atomic.Bool
	dbSeq      atomic.Int64

	mu struct {
		sync.Mutex
		started bool
		admin   string   // DSN of the maintenance database
		base    string   // DSN without dbname, to which a per-test dbname is appended
		cluster *cluster // nil when A2ASTORE_PG_DSN is used
		err     error    // why no server could be had
	}
)

// Main runs the package's tests and then stops the cluster, if one was
// started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	if err := stopReplicated(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stopping replicated cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	mu.Lock()
	c := mu.cluster
	mu.cluster = nil
	mu.Unlock()
	if c != nil {
		if err := c.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// DSN returns the connection string of a new, empty database for tb,
// dropped at tb's cleanup. It starts the package's cluster on first use.
// When no server can be had it fails tb under CI=true and skips it
// otherwise.
func DSN(tb testing.TB) string {
	tb.Helper()
	return DSNWith(tb, "")
}

// DSNWith is DSN with options appended to CREATE DATABASE, for example
// "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'" for a
// database whose default collation is not byte order.
func DSNWith(tb testing.TB, options string) string {
	tb.Helper()
	admin, base, err := server()
	if err != nil {
		unavailable(tb, err)
	}
	name := fmt.Sprintf("a2astore_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("pgtest: connect to server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" "+options); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			tb.Errorf("pgtest: connect to drop database: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database: %v", err)
		}
	})
	return base + " dbname=" + name
}

// AdminDSN returns the DSN of the server's maintenance database, for tests
// that need to look at the whole server (pg_stat_activity,
// pg_terminate_backend). It starts the cluster like DSN does.
func AdminDSN(tb testing.TB) string {
	tb.Helper()
	admin, _, err := server()
	if err != nil {
		unavailable(tb, err)
	}
	return admin
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("pgtest: no PostgreSQL server (CI=true, so this fails instead of skipping): %v", err)
	}
	tb.Skipf("pgtest: no PostgreSQL server, skipping (set %s, or install PostgreSQL 15 binaries): %v", EnvDSN, err)
}

// server returns the admin DSN and the per-database DSN prefix, starting
// the cluster once.
func server() (admin, base string, err error) {
	mu.Lock()
	defer mu.Unlock()
	if !mu.started {
		mu.started = true
		mu.admin, mu.base, mu.cluster, mu.err = connect()
	}
	return mu.admin, mu.base, mu.err
}

func connect() (admin, base string, c *cluster, err error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return "", "", nil, fmt.Errorf("parse %s: %w", EnvDSN, err)
		}
		// Keep every setting of the given DSN; a later dbname overrides the
		// earlier one in keyword/value form, so convert URLs to that form.
		kv := dsn
		if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
			kv = fmt.Sprintf("host=%s port=%d user=%s", quote(cfg.Host), cfg.Port, quote(cfg.User))
			if cfg.Password != "" {
				kv += " password=" + quote(cfg.Password)
			}
			if cfg.TLSConfig == nil {
				kv += " sslmode=disable"
			}
			kv += " dbname=" + quote(cfg.Database)
		}
		return kv, kv, nil, nil
	}
	if !mainCalled.Load() {
		return "", "", nil, errors.New("pgtest.Main was not called from TestMain, so a started cluster could not be stopped")
	}
	c, err = startCluster()
	if err != nil {
		return "", "", nil, err
	}
	base = fmt.Sprintf("host=%s port=%d user=postgres sslmode=disable", c.sockDir, c.port)
	return base + " dbname=postgres", base, c, nil
}

func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// cluster is a running throwaway PostgreSQL server.
type cluster struct {
	dir     string // temporary directory: data/, sock/, postgres.log
	sockDir string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	waitErr error         // valid after exited is closed
	// settings are extra -c name=value settings after the defaults (a
	// later -c wins).
	settings []string
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	if d := os.Getenv(EnvBin); d != "" {
		return d, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL binaries: set %s, put pg_config on PATH or install postgresql-15", EnvBin)
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// runAs returns the credential to run PostgreSQL programs with: the
// postgres user when we are root (PostgreSQL refuses to run as root), nil
// (ourselves) otherwise.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres OS user: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres user has non-numeric ids %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func startCluster(settings ...string) (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(c.dir)
		}
	}()
	c.settings = settings
	data := filepath.Join(c.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	initdb.Dir = c.dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if err := c.startOnFreePort(bin, data, cred); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// newCluster makes the temporary directory of a cluster and its socket
// directory, owned by the user PostgreSQL runs as.
func newCluster() (*cluster, error) {
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, sockDir: filepath.Join(dir, "sock")}
	if err := os.Mkdir(c.sockDir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, c.sockDir} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
	}
	return c, nil
}

// startOnFreePort starts the server on a free port. The port is chosen by
// binding port 0 and releasing it; another process may take it first, so
// a failed start is retried on a new port.
func (c *cluster) startOnFreePort(bin, data string, cred *syscall.Credential) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.port = port
		if lastErr = c.start(bin, data, cred); lastErr == nil {
			return nil
		}
	}
	return lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *cluster) start(bin, data string, cred *syscall.Credential) error {
	logPath := filepath.Join(c.dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", data,
		"-p", strconv.Itoa(c.port),
		"-k", c.sockDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
		"-c", "max_wal_size=2GB",
		"-c", "log_min_messages=warning",
	}
	for _, kv := range c.settings {
		args = append(args, "-c", kv)
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	c.cmd.Dir = c.dir
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.exited = make(chan struct{})
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()

	// Poll readiness: connect until it works, the server exits, or the
	// deadline passes.
	dsn := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=5", c.sockDir, c.port)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
			if err == nil {
				return nil
			}
		}
		select {
		case <-c.exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited during start-up (%v): %s", c.waitErr, tail(log))
		case <-ctx.Done():
			c.kill()
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres not ready after %v (last error %v): %s", startTimeout, err, tail(log))
		case <-tick.C:
		}
	}
}

func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (c *cluster) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	<-c.exited
}

// stop shuts the server down (fast shutdown: active sessions are
// disconnected) and removes its directory.
func (c *cluster) stop() error {
	defer os.RemoveAll(c.dir)
	if err := c.halt(); err != nil {
		return err
	}
	var ee *exec.ExitError
	if c.waitErr != nil && !errors.As(c.waitErr, &ee) {
		return c.waitErr
	}
	return nil
}

var schemaSeq atomic.Int64

// Schema creates a new, empty schema in the database dsn names and returns
// its name; it is dropped (with its contents) at tb's cleanup. Creating a
// schema takes about a millisecond where a database takes about a hundred,
// so suites that open many stores use one DSN and a Schema per store.
func Schema(tb testing.TB, dsn string) string {
	tb.Helper()
	name := fmt.Sprintf("s%d", schemaSeq.Add(1))
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE SCHEMA " + pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create schema: %v", err)
	}
	tb.Cleanup(func() {
		if err := exec("DROP SCHEMA IF EXISTS " + pgx.Identifier{name}.Sanitize() + " CASCADE"); err != nil {
			tb.Errorf("pgtest: drop schema: %v", err)
		}
	})
	return name
}
