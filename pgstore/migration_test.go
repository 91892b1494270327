package pgstore_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

const migration003 = "migrations/003_owner_and_counts.sql"

var testSeed = flag.Uint64("pgstore.seed", 0, "seed of the randomized pgstore tests (0: random)")

// testRand returns the seed of a randomized test, logged so a failure can
// be replayed with -pgstore.seed, and a generator seeded with it.
func testRand(t testing.TB) (uint64, *rand.Rand) {
	t.Helper()
	seed := *testSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -pgstore.seed=%d)", seed, seed)
	return seed, rand.New(rand.NewPCG(seed, 0xc0de))
}

const (
	migration004 = "migrations/004_count_ledger.sql"
	migration007 = "migrations/007_count_watermark.sql"
	migration009 = "migrations/009_count_triggers.sql"
)

// runMigration003 runs the shipped migration files 003, 004, 007 and 009 on conn,
// the way psql -f would run them (their statements in order, their own
// BEGIN/COMMIT), then 006 (runMigration006): what an externally managed
// schema of the release before owners runs to be current.
func runMigration003(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	for _, f := range []string{migration003, migration004, migration007, migration009} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(context.Background(), string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	runMigration006(t, conn)
}

const migration006 = "migrations/006_status_indexes.sql"

// runMigration006 runs the shipped migration file 006 on conn as psql -f
// does: each statement on its own, outside a transaction block (CREATE
// INDEX CONCURRENTLY refuses to run in one, and a multi-statement string
// is one).
func runMigration006(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	for _, stmt := range migrationStatements(t, migration006) {
		if _, err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v\n%s", migration006, err, stmt)
		}
	}
}

// migrationStatements returns the statements of a migration file without
// dollar quotes (006): its text without comment lines, split at ";\n".
func migrationStatements(t testing.TB, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "--") {
			lines = append(lines, l)
		}
	}
	var stmts []string
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";\n") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			stmts = append(stmts, stmt)
		}
	}
	return stmts
}

// The migration file holds, verbatim and in order, the statements the
// managed schema runs (for schema public), so the two cannot drift apart;
// and the startup check names it.
func TestMigration003HoldsTheManagedStatements(t *testing.T) {
	owner, indexes, counts := pgstore.MigrationStatements()
	for _, c := range []struct {
		file  string
		stmts []string
	}{{migration003, append(owner, indexes...)}, {migration009, counts}} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		file := string(b)
		at := 0
		for _, stmt := range c.stmts {
			i := strings.Index(file[at:], stmt+";\n")
			if i < 0 {
				t.Fatalf("%s lacks, or has out of order, the statement:\n%s", c.file, stmt)
			}
			at += i + len(stmt)
		}
	}
	if filepath.Base(pgstore.OwnerCountsMigrationFile) != filepath.Base(migration003) {
		t.Fatalf("OwnerCountsMigrationFile = %q", pgstore.OwnerCountsMigrationFile)
	}
	if filepath.Base(pgstore.CountLedgerMigrationFile) != filepath.Base(migration004) {
		t.Fatalf("CountLedgerMigrationFile = %q", pgstore.CountLedgerMigrationFile)
	}
	if filepath.Base(pgstore.CountWatermarkMigrationFile) != filepath.Base(migration007) {
		t.Fatalf("CountWatermarkMigrationFile = %q", pgstore.CountWatermarkMigrationFile)
	}
	if filepath.Base(pgstore.CountTriggersMigrationFile) != filepath.Base(migration009) {
		t.Fatalf("CountTriggersMigrationFile = %q", pgstore.CountTriggersMigrationFile)
	}
}

// oldRelease creates the table as the release before owners and counters
// left it: TableDDL and migration 001, no owner column, no counters.
func oldRelease(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	m1, err := os.ReadFile("migrations/001_ordering_indexes.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{pgstore.TableDDL("public"), string(m1)} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
}

// oldReleaseWithOwners is a database of the previous release holding a
// task per owner case.
func oldReleaseWithOwners(t testing.TB) (dsn string, conn *pgx.Conn, cases []ownerCase) {
	t.Helper()
	dsn = pgtest.DSN(t)
	conn = connect(t, dsn)
	oldRelease(t, conn)
	cases = ownerCases(t)
	insertOldRows(t, conn, cases)
	return dsn, conn, cases
}

// ownerCase is a task written by an older release with this metadata, and
// the owner the backfill must give it.
type ownerCase struct {
	id       string
	metadata []byte // stored form; nil = none
	want     string
}

func meta(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := taskcodec.EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ownerCases covers what OwnerPolicy wrote and what it could not have.
func ownerCases(t testing.TB) []ownerCase {
	const key = "a2astore.owner"
	truncated := meta(t, map[string]any{key: "carol"})
	return []ownerCase{
		{"plain", meta(t, map[string]any{key: "alice"}), "alice"},
		{"among others", meta(t, map[string]any{"x": []any{1.0, map[string]any{key: "mallory"}, nil, true}, key: "bob", "z": "q"}), "bob"},
		{"unicode", meta(t, map[string]any{key: "ünï 😀"}), "ünï 😀"},
		{"max length", meta(t, map[string]any{key: strings.Repeat("o", engine.MaxOwnerBytes)}), strings.Repeat("o", engine.MaxOwnerBytes)},
		{"nested only", meta(t, map[string]any{"n": map[string]any{key: "eve"}}), ""},
		{"number", meta(t, map[string]any{key: 42.0}), ""},
		{"empty", meta(t, map[string]any{key: ""}), ""},
		{"NUL", meta(t, map[string]any{key: "a\x00b"}), ""},
		{"invalid UTF-8", meta(t, map[string]any{key: "a\xffb"}), ""},
		{"too long", meta(t, map[string]any{key: strings.Repeat("o", engine.MaxOwnerBytes+1)}), ""},
		{"no metadata", nil, ""},
		{"truncated", truncated[:len(truncated)-1], ""},
		{"trailing byte", append(append([]byte{}, truncated...), 0), ""},
		{"key in a string value", meta(t, map[string]any{"note": key + " is alice"}), ""},
	}
}

func insertOldRows(t testing.TB, conn *pgx.Conn, cases []ownerCase) {
	t.Helper()
	for i, c := range cases {
		if _, err := conn.Exec(context.Background(),
			`INSERT INTO a2a_tasks (id, context_id, revision, state, metadata) VALUES ($1, $2, 1, $3, $4)`,
			c.id, fmt.Sprint("c", i%3), []string{"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}[i%2], c.metadata); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOwners reads the owner column (some cases' metadata is malformed,
// so Get could not decode their tasks).
func checkOwners(t testing.TB, conn *pgx.Conn, cases []ownerCase) {
	t.Helper()
	for _, c := range cases {
		var owner string
		if err := conn.QueryRow(context.Background(), `SELECT owner FROM a2a_tasks WHERE id = $1`, c.id).Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if owner != c.want {
			t.Errorf("%s: owner %.40q, want %.40q", c.id, owner, c.want)
		}
	}
}

func checkInvariants(t testing.TB, s *pgstore.Store) {
	t.Helper()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Issue 15: an externally managed schema of the previous release gets the
// owner column, its indexes and the counters from migration 003; owners
// OwnerPolicy kept in metadata are copied once — a later run of the file
// adopts no owner a client wrote into metadata since.
func TestMigration003(t *testing.T) {
	ctx := context.Background()
	dsn, conn, cases := oldReleaseWithOwners(t)
	ext := pgstore.Options{ExternalSchema: true}
	_, err := pgstore.Open(ctx, dsn, ext)
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.OwnerCountsMigrationFile) {
		t.Fatalf("before the migration: %v", err)
	}

	runMigration003(t, conn)
	s, err := pgstore.Open(ctx, dsn, ext)
	if err != nil {
		t.Fatalf("after the migration: %v", err)
	}
	defer s.Close()
	checkOwners(t, conn, cases)
	checkInvariants(t, s)
	checkTotal(t, s, engine.ListRequest{Owner: "alice"}, 1)
	if r := must(t)(s.Get(ctx, "plain")); r.Owner != "alice" {
		t.Fatalf("Get: owner %q", r.Owner)
	}

	// A client writes a forged owner into metadata of an ownerless task;
	// running the file again changes no owner and keeps the counts exact.
	createForged(t, s)
	runMigration003(t, conn)
	checkOwners(t, conn, append(cases, ownerCase{id: "forged", want: ""}))
	checkTotal(t, s, engine.ListRequest{Owner: "alice"}, 1)
	checkInvariants(t, s)
}

// createForged creates an ownerless task whose metadata names an owner
// the way OwnerPolicy did: after the upgrade that is only client data.
func createForged(t testing.TB, s *pgstore.Store) {
	t.Helper()
	forged := task("forged", "c", a2a.TaskStateWorking)
	forged.Metadata = map[string]any{"a2astore.owner": "alice"}
	must(t)(s.Create(context.Background(), forged))
}

// needPsql returns the psql binary, or skips t without one — fails it
// under CI=true, where a skipped migration test would hide a broken file.
func needPsql(t *testing.T) string {
	t.Helper()
	psql := findPsql()
	if psql == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no psql binary (CI=true, so this fails instead of skipping)")
		}
		t.Skip("no psql binary")
	}
	return psql
}

// docs/postgres.md runs the file with psql -f: psql splits it into statements
// itself (dollar-quoted bodies, the DO block), stopping at the first error.
func TestMigration003WithPsql(t *testing.T) {
	psql := needPsql(t)
	dsn, conn, cases := oldReleaseWithOwners(t)
	for range 2 {
		cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", migration003, "-f", migration004, "-f", migration006, "-f", migration007, "-f", migration009, dsn)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
	}
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{ExternalSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkOwners(t, conn, cases)
	checkInvariants(t, s)
}

// findPsql returns a psql binary: on PATH, or beside the server binaries.
func findPsql() string {
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	if d := os.Getenv(pgtest.EnvBin); d != "" {
		if _, err := os.Stat(filepath.Join(d, "psql")); err == nil {
			return filepath.Join(d, "psql")
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(found) > 0 {
		return found[len(found)-1]
	}
	return ""
}

// Issue 15: the managed schema upgrades a database of the previous release
// on first startup: owner column with the one-time backfill, indexes and
// counters. Later startups adopt nothing.
func TestManagedUpgrade(t *testing.T) {
	ctx := context.Background()
	dsn, conn, cases := oldReleaseWithOwners(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkOwners(t, conn, cases)
	checkInvariants(t, s)

	createForged(t, s)
	s2, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	checkOwners(t, conn, []ownerCase{{id: "forged", want: ""}, {id: "plain", want: "alice"}})
}

// Review of issue 15: the owner backfill reads the metadata key the
// deployment's OwnerPolicy wrote, or none. Under OwnerPolicy{MetadataKey:
// "tenant"} (the previous release's option), "a2astore.owner" was client
// metadata: mallory planted it naming alice on its own task. With the key
// named (managed: Options.UpgradeOwnerKey; migration file: the setting
// a2astore.upgrade_owner_key, as PGOPTIONS sets it) the task stays
// mallory's; with the backfill off no task gets an owner.
func TestUpgradeOwnerKey(t *testing.T) {
	ctx := context.Background()
	rows := func(t *testing.T) (dsn string, conn *pgx.Conn) {
		dsn = pgtest.DSN(t)
		conn = connect(t, dsn)
		oldRelease(t, conn)
		execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, metadata) VALUES
('planted', 'c', 1, 'TASK_STATE_WORKING', $1), ('alices', 'c', 1, 'TASK_STATE_WORKING', $2), ('other', 'c', 1, 'TASK_STATE_WORKING', $3)`,
			meta(t, map[string]any{"tenant": "mallory", "a2astore.owner": "alice"}),
			meta(t, map[string]any{"tenant": "alice"}),
			meta(t, map[string]any{"a2astore.owner": "bob"}))
		return dsn, conn
	}
	byTenant := []ownerCase{{id: "planted", want: "mallory"}, {id: "alices", want: "alice"}, {id: "other", want: ""}}
	none := []ownerCase{{id: "planted", want: ""}, {id: "alices", want: ""}, {id: "other", want: ""}}
	check := func(t *testing.T, dsn string, conn *pgx.Conn, want []ownerCase) {
		t.Helper()
		checkOwners(t, conn, want)
		s, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		checkInvariants(t, s)
	}
	for _, c := range []struct {
		name string
		opts pgstore.Options
		want []ownerCase
	}{
		{"managed, key named", pgstore.Options{UpgradeOwnerKey: "tenant"}, byTenant},
		{"managed, backfill off", pgstore.Options{UpgradeWithoutOwners: true}, none},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn, conn := rows(t)
			s, err := pgstore.Open(ctx, dsn, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			check(t, dsn, conn, c.want)
		})
	}
	for _, c := range []struct {
		key  string
		want []ownerCase
	}{{"tenant", byTenant}, {"", none}} {
		t.Run(fmt.Sprintf("migration file, setting %q", c.key), func(t *testing.T) {
			dsn, conn := rows(t)
			execSQL(t, conn, `SELECT set_config('a2astore.upgrade_owner_key', $1, false)`, c.key)
			runMigration003(t, conn)
			check(t, dsn, conn, c.want)
		})
		t.Run(fmt.Sprintf("psql with PGOPTIONS %q", c.key), func(t *testing.T) {
			psql := needPsql(t)
			dsn, conn := rows(t)
			cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", migration003, "-f", migration004, "-f", migration006, "-f", migration007, "-f", migration009, dsn)
			cmd.Env = append(os.Environ(), "PGOPTIONS=-c a2astore.upgrade_owner_key="+c.key)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("psql: %v\n%s", err, out)
			}
			check(t, dsn, conn, c.want)
		})
	}
	t.Run("bad options", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		for _, opts := range []pgstore.Options{
			{UpgradeOwnerKey: "tenant", UpgradeWithoutOwners: true},
			{UpgradeOwnerKey: "a\x00b"},
		} {
			if _, err := pgstore.Open(ctx, dsn, opts); !errors.Is(err, engine.ErrInvalidArgument) {
				t.Errorf("Open(%+v): %v", opts, err)
			}
		}
	})
}

// The PL/pgSQL reader of stored metadata agrees with taskcodec on random
// metadata and on random corruptions of it: where Go decodes a top-level
// string that PostgreSQL text can hold, SQL returns it; otherwise NULL —
// and it never raises an error.
func TestMetadataStringMatchesCodec(t *testing.T) {
	seed, rng := testRand(t)
	_, dsn := open(t)
	conn := connect(t, dsn)
	const key = "a2astore.owner"
	strs := []string{"", "alice", "a\x00", "\xff", "é", "a2astore.owner", strings.Repeat("x", 200), "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "😀"}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(8); {
		case k == 0:
			return nil
		case k == 1:
			return rng.IntN(2) == 0
		case k == 2:
			return []float64{0, -1.5, math.MaxFloat64, math.SmallestNonzeroFloat64}[rng.IntN(4)]
		case k < 5 || depth > 3:
			return strs[rng.IntN(len(strs))]
		case k == 5:
			a := make([]any, rng.IntN(4))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[strs[rng.IntN(len(strs))]] = value(depth + 1)
			}
			return m
		}
	}
	checked, found := 0, 0
	for i := range 400 {
		m := map[string]any{}
		for range rng.IntN(4) {
			m[strs[rng.IntN(len(strs))]] = value(1)
		}
		switch rng.IntN(4) {
		case 0:
			m[key] = value(1)
		case 1, 2:
			m[key] = strs[rng.IntN(len(strs))]
		}
		b := meta(t, m)
		if b == nil {
			continue
		}
		inputs := [][]byte{b}
		if i%2 == 0 && len(b) > 1 { // a corrupted copy: a byte changed, or cut short
			c := append([]byte{}, b...)
			if rng.IntN(2) == 0 {
				c[1+rng.IntN(len(c)-1)] = byte(rng.IntN(256))
			} else {
				c = c[:1+rng.IntN(len(c)-1)]
			}
			inputs = append(inputs, c)
		}
		for _, in := range inputs {
			want, ok := "", false
			if dm, err := taskcodec.DecodeMetadata(in); err == nil {
				want, ok = dm[key].(string)
				ok = ok && utf8.ValidString(want) && !strings.ContainsRune(want, 0)
			}
			var got *string
			if err := conn.QueryRow(context.Background(), `SELECT a2a_taskcodec_metadata_string($1, $2)`, in, key).Scan(&got); err != nil {
				t.Fatalf("seed %d: %x: %v", seed, in, err)
			}
			if ok != (got != nil) || (ok && *got != want) {
				t.Fatalf("seed %d: metadata %x: SQL %v, Go %q (found %v)", seed, in, deref(got), want, ok)
			}
			checked++
			if ok {
				found++
			}
		}
	}
	t.Logf("%d inputs, %d with an owner", checked, found)
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkTotal lists req with its total and checks the total.
func checkTotal(t testing.TB, s engine.Store, req engine.ListRequest, want int) {
	t.Helper()
	req.IncludeTotalSize = true
	resp, err := s.List(context.Background(), &req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.TotalSize != want {
		t.Fatalf("%+v: total %d, want %d", req, resp.TotalSize, want)
	}
}
