package a2aserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// TestVersionGuard (W8, A2A §3.6.2): a call naming a version other than
// 1.0 (by Major.Minor; a patch number is ignored), or a value that is not
// a version, is VersionNotSupportedError without the value in the
// message; 1.0 and no version at all are served (a list's empty elements
// ignored), and Observe sees each call's outcome.
func TestVersionGuard(t *testing.T) {
	for _, c := range []struct {
		header []string // nil: no A2A-Version
		served string   // "" with ok: served as no version; "-": refused
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{" "}, ""},
		{[]string{"1.0"}, "1.0"},
		{[]string{"1.0.3"}, "1.0"},
		{[]string{" 1.0 "}, "1.0"},
		{[]string{"1.0", "1.0"}, "1.0"},
		{[]string{"1.0,1.0"}, "1.0"},
		{[]string{"1.0,"}, "1.0"},  // empty list elements are ignored (RFC 9110, 5.6.1)
		{[]string{"1.0, "}, "1.0"}, // (review by helper-38: refused before)
		{[]string{"1.0", ""}, "1.0"},
		{[]string{",,"}, ""},
		{[]string{"99.0"}, "-"},
		{[]string{"0.3"}, "-"},
		{[]string{"1.1"}, "-"},
		{[]string{"2.0"}, "-"},
		{[]string{"1"}, "-"},
		{[]string{"1.0.0.0"}, "-"},
		{[]string{"v1.0"}, "-"},
		{[]string{"1.x"}, "-"},
		{[]string{"+1.0"}, "-"},
		{[]string{"1.0, 0.3"}, "-"},
		{[]string{"1.0", "99.0"}, "-"},
		{[]string{"99999999999.0"}, "-"},
		{[]string{"secret-token"}, "-"},
	} {
		params := map[string][]string{}
		if c.header != nil {
			params["a2a-version"] = c.header // as gRPC metadata carries it
		}
		ctx, callCtx := a2asrv.NewCallContext(context.Background(), a2asrv.NewServiceParams(params))
		var seen []string
		g := VersionGuard{Observe: func(v string, ok bool) {
			if !ok {
				v = "-"
			}
			seen = append(seen, v)
		}}
		_, res, err := g.Before(ctx, callCtx, &a2asrv.Request{})
		refused := c.served == "-"
		if res != nil || refused != errors.Is(err, a2a.ErrVersionNotSupported) || (!refused && err != nil) {
			t.Errorf("A2A-Version %q: result %v, error %v; want refused=%v", c.header, res, err, refused)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("A2A-Version %q: the error quotes the value: %v", c.header, err)
		}
		if len(seen) != 1 || seen[0] != c.served {
			t.Errorf("A2A-Version %q: observed %q, want [%q]", c.header, seen, c.served)
		}
	}
	// Another supported set.
	ctx, callCtx := a2asrv.NewCallContext(context.Background(), a2asrv.NewServiceParams(map[string][]string{"A2A-Version": {"0.3"}}))
	if _, _, err := (VersionGuard{Supported: []a2a.ProtocolVersion{"1.0", "0.3"}}).Before(ctx, callCtx, &a2asrv.Request{}); err != nil {
		t.Errorf("0.3 with Supported 1.0, 0.3: %v", err)
	}
}

// TestVersionParam (A2A §3.6.1): the A2A-Version query parameter stands for
// the header when the request has none; a header wins.
func TestVersionParam(t *testing.T) {
	var got []string
	h := VersionParam(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values(VersionHeader)
	}))
	for _, c := range []struct {
		url    string
		header string
		want   string
	}{
		{"/tasks/t-1?A2A-Version=99.0", "", "99.0"},
		{"/tasks/t-1?A2A-Version=99.0", "1.0", "1.0"},
		{"/tasks/t-1?a2a-version=99.0", "", ""}, // query names are case-sensitive
		{"/tasks/t-1", "", ""},
	} {
		r := httptest.NewRequest(http.MethodGet, c.url, nil)
		if c.header != "" {
			r.Header.Set(VersionHeader, c.header)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if strings.Join(got, ",") != c.want {
			t.Errorf("%s with header %q: handler sees %q, want %q", c.url, c.header, got, c.want)
		}
	}
}
