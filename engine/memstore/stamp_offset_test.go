package memstore

// TestStampOffsets: a status timestamp reads back with its instant and its
// zone offset from the stamp, Get, and full and light pages, as from the
// task codec (taskcodec.AppendTimestamp is the one encoder); the offsets
// that form cannot hold are stored as UTC, as AppendTimestamp documents —
// among them negative offsets with a seconds part (local mean times west
// of Greenwich), which Go's UnmarshalBinary reads back as another offset
// (it takes the seconds byte as unsigned). The stamp's instant, which the
// status time filter compares, equals the time in every case.

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
)

func TestStampOffsets(t *testing.T) {
	cases := []struct {
		name string
		ts   time.Time
		// documentedLoss: taskcodec.AppendTimestamp documents that this
		// offset is stored as UTC (minute part -1, refused by
		// MarshalBinary; golang/go#81215).
		documentedLoss bool
	}{
		{"utc", time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC), false},
		{"local", time.Date(2025, 3, 4, 5, 6, 7, 8, time.Local), false},
		{"+05:30", time.Date(2025, 3, 4, 5, 6, 7, 8, time.FixedZone("IST", 5*3600+30*60)), false},
		{"-08:00", time.Date(2025, 3, 4, 5, 6, 7, 8, time.FixedZone("PST", -8*3600)), false},
		{"zero time", time.Time{}, false},
		{"monotonic reading", time.Now(), false},
		{"year -5000", time.Date(-5000, 1, 1, 0, 0, 0, 1, time.UTC), false},
		{"year 300000", time.Date(300000, 12, 31, 23, 59, 59, 999999999, time.UTC), false},
		{"+22:45 (max-ish)", time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 22*3600+45*60)), false},
		{"+00:00:30 (v2 form, positive seconds)", time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", 30)), false},
		{"+00:57:44 (Prague LMT)", time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", 57*60+44)), false},
		// Negative offsets with a seconds part (every LMT zone west of
		// Greenwich, e.g. America/New_York before 1883: -4:56:02): stored
		// as UTC, not as another offset.
		{"-04:56:02 (New York LMT)", time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", -(4*3600+56*60+2))), true},
		{"-00:00:30", time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", -30)), true},
		// Documented loss: stored as UTC.
		{"-00:01:30 (documented: stored as UTC)", time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("X", -90)), true},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, wantOff := c.ts.Zone()
			check := func(where string, got *time.Time) {
				t.Helper()
				if got == nil {
					t.Errorf("%s: no status timestamp", where)
					return
				}
				if !got.Equal(c.ts) {
					t.Errorf("%s: instant %v, stored %v", where, *got, c.ts)
				}
				_, off := got.Zone()
				if !c.documentedLoss && off != wantOff {
					t.Errorf("%s: zone offset %ds, stored %ds (instant kept)", where, off, wantOff)
				}
				if c.documentedLoss && (off != 0 || got.Location() != time.UTC) {
					t.Errorf("%s: %v, want the instant in UTC", where, *got)
				}
			}

			// The stamp itself.
			st := stampOf(&c.ts)
			if at, ok := st.time(); !ok {
				t.Errorf("stamp: does not decode")
			} else {
				check("stamp", &at)
			}
			if at, ok := st.instant(); !ok || !at.Equal(c.ts) {
				t.Errorf("stamp instant %v (%v), want %v", at, ok, c.ts)
			}

			// Through the store: Get, a full page and a light page.
			s := New(Options{})
			ts := c.ts
			in := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts}}
			rec, err := s.Create(ctx, in)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			check("Create's result", rec.Task.Status.Timestamp)
			g, err := s.Get(ctx, "t")
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			check("Get", g.Task.Status.Timestamp)
			for _, proj := range []engine.Projection{engine.ProjectionFull, engine.ProjectionLight} {
				resp, err := s.List(ctx, &engine.ListRequest{Projection: proj})
				if err != nil || len(resp.Tasks) != 1 {
					t.Fatalf("List(projection %d): %v, %d tasks", proj, err, len(resp.Tasks))
				}
				check("List", resp.Tasks[0].Status.Timestamp)
			}

			// The codec (what pebblestore returns) agrees.
			b, err := taskcodec.EncodeTask(in)
			if err != nil {
				t.Fatalf("EncodeTask: %v", err)
			}
			dt, err := taskcodec.DecodeTask(b)
			if err != nil {
				t.Fatalf("DecodeTask: %v", err)
			}
			check("taskcodec", dt.Status.Timestamp)
		})
	}
}

// TestStampTimeAsUnmarshalBinary: stamp.time returns what time's
// UnmarshalBinary returns for the stamp's bytes: identically (==: the
// same wall, ext and location) on its UTC fast path, and the same instant
// and zone off it (where UnmarshalBinary makes a new *Location each time).
func TestStampTimeAsUnmarshalBinary(t *testing.T) {
	for _, ts := range []time.Time{
		time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC),
		time.Unix(0, 0).UTC(),
		time.Unix(-1, 999999999).UTC(),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5000, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(300000, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Now().UTC(),
		time.Date(2025, 3, 4, 5, 6, 7, 8, time.FixedZone("PST", -8*3600)),
		time.Date(2025, 3, 4, 5, 6, 7, 8, time.Local),
		time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", 30)),
		// Offsets the stamp stores as UTC (taskcodec.AppendTimestamp).
		time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("", -60)),
		time.Date(1800, 1, 1, 0, 0, 0, 0, time.FixedZone("", -3601)),
	} {
		s := stampOf(&ts)
		var want time.Time
		n := 15
		if s[0] == 2 {
			n = 16
		}
		if err := want.UnmarshalBinary(s[:n]); err != nil {
			t.Fatalf("%v: %v", ts, err)
		}
		got, ok := s.time()
		gotName, gotOff := got.Zone()
		wantName, wantOff := want.Zone()
		same := got == want
		if want.Location() != time.UTC {
			same = got.Equal(want) && gotName == wantName && gotOff == wantOff
		}
		if !ok || !same {
			t.Errorf("stamp of %v: time() = %#v, %v; UnmarshalBinary %#v", ts, got, ok, want)
		}
	}
}
