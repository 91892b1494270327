package a2aserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// DefaultAgentCardMaxAge is how long clients may cache the agent card
// without asking again (AgentCardOptions.MaxAge).
const DefaultAgentCardMaxAge = 5 * time.Minute

// AgentCardOptions configures AgentCardHandler. The zero value is valid.
type AgentCardOptions struct {
	// MaxAge is the Cache-Control max-age: how long a client may use the
	// card without asking again. 0 = DefaultAgentCardMaxAge; negative =
	// no-cache (clients revalidate every time, cheaply, with the ETag).
	MaxAge time.Duration
	// LastModified is the Last-Modified time: when the card took its
	// current content. Zero = the time AgentCardHandler was called.
	LastModified time.Time
}

// AgentCardHandler serves a public agent card that does not change while
// the program runs, with the HTTP caching A2A v1.0 §8.6.1 recommends:
// Cache-Control with max-age (SHOULD), an ETag derived from the card's
// content (SHOULD) and Last-Modified (MAY). A conditional request whose
// If-None-Match names the ETag (or, without If-None-Match, whose
// If-Modified-Since is not before Last-Modified) is answered 304 Not
// Modified without the card; GET and HEAD are served, OPTIONS answers a
// CORS preflight, other methods get 405. The card may be read from any
// origin (Access-Control-Allow-Origin: *), as a2a-go's
// a2asrv.NewStaticAgentCardHandler allows; a2a-go's handler sends none of
// the caching headers.
//
// The ETag is the SHA-256 of the card's JSON, so it changes exactly when
// the served bytes do, also when the card's version field does not.
func AgentCardHandler(card *a2a.AgentCard, opts AgentCardOptions) (http.Handler, error) {
	body, err := json.Marshal(card)
	if err != nil {
		return nil, fmt.Errorf("a2aserver: agent card: %w", err)
	}
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`
	cacheControl := "no-cache"
	switch {
	case opts.MaxAge == 0:
		cacheControl = "public, max-age=" + strconv.Itoa(int(DefaultAgentCardMaxAge.Seconds()))
	case opts.MaxAge > 0:
		cacheControl = "public, max-age=" + strconv.FormatInt(int64(opts.MaxAge/time.Second), 10)
	}
	modified := opts.LastModified
	if modified.IsZero() {
		modified = time.Now()
	}
	modified = modified.UTC().Truncate(time.Second)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, If-None-Match, If-Modified-Since")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusOK)
			return
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", cacheControl)
		h.Set("ETag", etag)
		// ServeContent answers If-None-Match, If-Modified-Since, HEAD and
		// ranges by the rules of RFC 9110.
		http.ServeContent(w, r, "", modified, bytes.NewReader(body))
	}), nil
}
