package pgstore

import (
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Stored times a cursor can represent.
//
// A cursor's time is 0..math.MaxInt64 µs since the Unix epoch (S5), from
// 1970-01-01 to 294247-01-10T04:00:54.775807Z. timestamptz holds more:
// 4713 BC to 294276 AD, and ±infinity. The store itself only writes times
// within the range (clock_timestamp(), advanced by 1 µs and refused at
// the maximum), but rows written by others may lie outside it. Such rows:
//
//   - are left out of every List and total, so a List never fails because
//     of a stored time and never hands out a token it would reject;
//   - are read by Get with the cursor clamped into range: 0 below it,
//     math.MaxInt64 above it;
//   - move into range on their next mutation when they lie below it; when
//     they lie at or above the maximum, the task is at its maximum time and
//     every mutation fails with ErrInternal, changing nothing (S5).
//
// A managed schema refuses them with a CHECK constraint (timeRangeCheck,
// added NOT VALID: existing rows keep their times, P2), and startup on any
// schema fails with ErrSchema naming the rows and the fix while some
// remain.
var (
	minUpdatedAt = time.UnixMicro(0).UTC()
	maxUpdatedAt = time.UnixMicro(math.MaxInt64).UTC()
)

// SQL forms of the range: the bounds as timestamptz literals, the condition
// a listed row meets, and the condition the startup check looks for.
var (
	minUpdatedAtSQL = sqlTimestamptz(minUpdatedAt)
	maxUpdatedAtSQL = sqlTimestamptz(maxUpdatedAt)
	inTimeRangeSQL  = "updated_at >= " + minUpdatedAtSQL + " AND updated_at <= " + maxUpdatedAtSQL
	outOfRangeSQL   = "updated_at < " + minUpdatedAtSQL + " OR updated_at > " + maxUpdatedAtSQL
)

// timeRangeConstraint names the managed schema's CHECK constraint.
const timeRangeConstraint = "a2a_tasks_updated_at_range"

// sqlTimestamptz is t as a timestamptz literal with an explicit UTC offset,
// so its meaning does not depend on the session's time zone.
func sqlTimestamptz(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02 15:04:05.999999-07") + "'"
}

// cursorTime is a stored updated_at as a cursor time, clamped into
// 0..math.MaxInt64.
func cursorTime(ts pgtype.Timestamptz) int64 {
	switch {
	case ts.InfinityModifier == pgtype.Infinity: // Time is zero: check first
		return math.MaxInt64
	case ts.InfinityModifier == pgtype.NegativeInfinity || ts.Time.Before(minUpdatedAt):
		return 0
	case ts.Time.After(maxUpdatedAt):
		return math.MaxInt64
	}
	return ts.Time.UnixMicro()
}

// TimeRangeDDL returns the statement that adds the CHECK constraint a
// managed schema has, keeping updated_at within what a cursor can
// represent, to the table in schema: for externally managed schemas
// (pgstore/migrations/002_updated_at_range.sql holds it for "public"). It
// is idempotent, and NOT VALID: rows already outside the range stay until
// fixed (startup names them).
func TimeRangeDDL(schema string) string {
	tbl := pgx.Identifier{schema, "a2a_tasks"}.Sanitize()
	return "ALTER TABLE " + tbl + "\n  DROP CONSTRAINT IF EXISTS " + timeRangeConstraint +
		",\n  ADD CONSTRAINT " + timeRangeConstraint + "\n    CHECK (" + inTimeRangeSQL + ") NOT VALID"
}
