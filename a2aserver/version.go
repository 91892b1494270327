package a2aserver

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// VersionGuard is an a2asrv.CallInterceptor that refuses a call naming an
// A2A protocol version the server does not serve (A2A v1.0 §3.6.2, W8):
// the A2A-Version service parameter (HTTP header, gRPC metadata key
// a2a-version; VersionParam adds the HTTP query parameter) is compared by
// Major.Minor — a patch number is ignored, as §3.6 requires — and a
// version not in Supported, or a value that is not a version at all, gets
// A2A's VersionNotSupportedError: JSON-RPC -32009, HTTP 400 with reason
// VERSION_NOT_SUPPORTED, gRPC UNIMPLEMENTED through GRPCErrorCodes (the
// reason in the status's ErrorInfo). The message never quotes the value.
// Install it first, before identity and the other guards: a call in a
// version the server does not speak is not interpreted at all.
//
// A call without the parameter (or with an empty one) is served as
// Supported[0]. §3.6.2 says to read an empty value as 0.3; this server
// serves 1.0 only, and every official 1.0 client measured sends the
// parameter on every call (a2a-go v2.3.1, @a2a-js/sdk 1.3.0 and the
// official TCK, on all three transports), so the rule would only refuse
// calls written by hand (curl, scripts) that are 1.0 calls in every other
// respect. A 0.3 client's calls use 0.3 method names and paths, which a
// 1.0 server answers method-not-found or not-found anyway.
//
// a2a-go v2.3.1 defines VersionNotSupportedError but never reads the
// parameter: without this guard every version is served as 1.0.
type VersionGuard struct {
	a2asrv.PassthroughCallInterceptor
	// Supported lists the Major.Minor versions served, the first being
	// the one a call without A2A-Version gets. Empty: a2a.Version ("1.0").
	Supported []a2a.ProtocolVersion
	// Observe, when set, is called once per call with the version it is
	// served in ("" when the call named none) and ok true, or with the
	// value the client sent and ok false when the call is refused. The
	// refused value is the client's: never use it as a metric label.
	Observe func(version string, ok bool)
}

var _ a2asrv.CallInterceptor = VersionGuard{}

// VersionHeader is the A2A-Version service parameter (a2a.SvcParamVersion).
const VersionHeader = a2a.SvcParamVersion

// Before implements a2asrv.CallInterceptor.
func (g VersionGuard) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	vals, _ := callCtx.ServiceParams().Get(VersionHeader)
	// A list's empty elements are ignored (RFC 9110, 5.6.1).
	var listed []string
	for _, v := range strings.Split(strings.Join(vals, ","), ",") {
		if v = strings.TrimSpace(v); v != "" {
			listed = append(listed, v)
		}
	}
	if len(listed) == 0 {
		g.observe("", true)
		return ctx, nil, nil
	}
	requested := strings.Join(listed, ",")
	for _, v := range listed {
		if !g.supports(v) {
			g.observe(requested, false)
			return ctx, nil, a2a.NewError(a2a.ErrVersionNotSupported, "A2A protocol version not supported; supported: "+strings.Join(g.supported(), ", "))
		}
	}
	g.observe(majorMinor(requested), true)
	return ctx, nil, nil
}

func (g VersionGuard) observe(version string, ok bool) {
	if g.Observe != nil {
		g.Observe(version, ok)
	}
}

// supports reports whether v, a Major.Minor[.Patch] version, is served.
func (g VersionGuard) supports(v string) bool {
	mm := majorMinor(v)
	return mm != "" && slices.Contains(g.supported(), mm)
}

// supported returns the Major.Minor versions served (the error message
// names them: they are the server's, not the client's).
func (g VersionGuard) supported() []string {
	if len(g.Supported) == 0 {
		return []string{string(a2a.Version)}
	}
	out := make([]string, 0, len(g.Supported))
	for _, s := range g.Supported {
		out = append(out, majorMinor(string(s)))
	}
	return out
}

// majorMinor returns the Major.Minor of a version Major.Minor[.Patch]
// (decimal numbers, no signs or spaces) in canonical form ("01.0" is
// "1.0"), or "" when v is not one. For a list (values joined by commas)
// it returns the first one's.
func majorMinor(v string) string {
	v, _, _ = strings.Cut(v, ",")
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return ""
	}
	var nums [2]uint64
	for i, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return ""
		}
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return ""
		}
		if i < 2 {
			nums[i] = n
		}
	}
	return strconv.FormatUint(nums[0], 10) + "." + strconv.FormatUint(nums[1], 10)
}

// VersionParam wraps an HTTP handler of a2a-go's JSON-RPC or HTTP+JSON
// binding so that the A2A-Version query parameter, which §3.6.1 lets a
// client send instead of the header (GET /tasks/t-1?A2A-Version=1.0),
// reaches VersionGuard: when a request has no A2A-Version header, the
// parameter's values become the header. A request with the header keeps
// it; the parameter is then ignored.
func VersionParam(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values(VersionHeader)) == 0 && r.URL.RawQuery != "" {
			if vals := r.URL.Query()[VersionHeader]; len(vals) > 0 {
				r = r.Clone(r.Context())
				r.Header[http.CanonicalHeaderKey(VersionHeader)] = vals
			}
		}
		h.ServeHTTP(w, r)
	})
}
