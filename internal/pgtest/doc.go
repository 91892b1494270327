// Package pgtest gives tests a real PostgreSQL server: an existing one named
// by the environment, or a throwaway cluster it starts from the installed
// PostgreSQL binaries and stops when the test binary ends.
//
// # Usage
//
// A test package calls Main from TestMain and DSN from each test:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.DSN(t) // a fresh, empty database for this test
//		...
//	}
//
// Every DSN call creates a new database, dropped at the test's cleanup, so
// tests are isolated from each other and may run in parallel.
//
// # Where the server comes from
//
//   - A2ASTORE_PG_DSN set: that server is used. Its role needs CREATEDB; the
//     DSN's own database is only used to create and drop the per-test
//     databases (named a2astore_test_<pid>_<n>).
//   - Otherwise the first DSN call starts a cluster: initdb (trust auth,
//     UTF8, --no-sync) into a fresh temporary directory, then postgres on a
//     free TCP port on 127.0.0.1 and its own unix socket directory, with
//     fsync, synchronous_commit and full_page_writes off. Binaries are taken
//     from A2ASTORE_PG_BIN if set, else `pg_config --bindir` on PATH, else
//     the newest /usr/lib/postgresql/*/bin (Debian/Ubuntu layout; CI
//     installs the postgresql-15 package). PostgreSQL refuses to run as
//     root, so when the test binary runs as root both initdb and postgres run
//     as the `postgres` OS user, which owns the temporary directory. Main
//     stops the server (fast shutdown) and removes the directory when the
//     tests end; if the test binary is killed the postmaster gets SIGQUIT
//     through the parent-death signal.
//
// # When no server can be had
//
// With CI=true, DSN fails the test (a CI run must never silently skip the
// PostgreSQL tests). Otherwise it skips the test with a message saying what
// is missing.
package pgtest
