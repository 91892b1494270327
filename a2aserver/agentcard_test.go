package a2aserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestAgentCardHandler (A2A §8.6.1): the card comes with Cache-Control
// max-age, an ETag of its content and Last-Modified; a request naming the
// ETag (If-None-Match) or not older than Last-Modified (If-Modified-Since)
// gets 304 without the card; another card has another ETag.
func TestAgentCardHandler(t *testing.T) {
	card := &a2a.AgentCard{Name: "a", Version: "1.0.0", Description: "d"}
	modified := time.Date(2026, 12, 1, 10, 0, 0, 500, time.UTC)
	h, err := AgentCardHandler(card, AgentCardOptions{LastModified: modified})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(method string, header map[string]string) *http.Response {
		r := httptest.NewRequest(method, "/.well-known/agent-card.json", nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}

	resp := serve(http.MethodGet, nil)
	body, _ := io.ReadAll(resp.Body)
	var got a2a.AgentCard
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Name != "a" {
		t.Fatalf("GET: %d %s", resp.StatusCode, body)
	}
	etag := resp.Header.Get("ETag")
	for k, want := range map[string]string{
		"Cache-Control":               "public, max-age=300",
		"Last-Modified":               "Tue, 01 Dec 2026 10:00:00 GMT",
		"Content-Type":                "application/json",
		"Access-Control-Allow-Origin": "*",
	} {
		if v := resp.Header.Get(k); v != want {
			t.Errorf("GET: %s %q, want %q", k, v, want)
		}
	}
	if len(etag) < 3 || etag[0] != '"' {
		t.Fatalf("GET: ETag %q, want a strong entity tag", etag)
	}

	for _, c := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"If-None-Match: the ETag", map[string]string{"If-None-Match": etag}, http.StatusNotModified},
		{"If-None-Match: a list with it", map[string]string{"If-None-Match": `"other", ` + etag}, http.StatusNotModified},
		{"If-None-Match: weak", map[string]string{"If-None-Match": "W/" + etag}, http.StatusNotModified},
		{"If-None-Match: *", map[string]string{"If-None-Match": "*"}, http.StatusNotModified},
		{"If-None-Match: another", map[string]string{"If-None-Match": `"other"`}, http.StatusOK},
		{"If-Modified-Since: Last-Modified", map[string]string{"If-Modified-Since": "Tue, 01 Dec 2026 10:00:00 GMT"}, http.StatusNotModified},
		{"If-Modified-Since: before", map[string]string{"If-Modified-Since": "Tue, 01 Dec 2026 09:59:59 GMT"}, http.StatusOK},
		{"another ETag wins over If-Modified-Since", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": "Tue, 01 Dec 2026 10:00:00 GMT"}, http.StatusOK},
	} {
		resp := serve(http.MethodGet, c.header)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
		if c.want == http.StatusNotModified && (len(body) > 0 || resp.Header.Get("ETag") != etag || resp.Header.Get("Cache-Control") == "") {
			t.Errorf("%s: 304 with body %q, ETag %q, Cache-Control %q; want no body, the ETag and Cache-Control", c.name, body, resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
		}
	}

	if resp := serve(http.MethodHead, nil); resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != etag {
		t.Errorf("HEAD: %d ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	if resp := serve(http.MethodOptions, map[string]string{"Origin": "https://x.example", "Access-Control-Request-Method": "GET"}); resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Methods") == "" {
		t.Errorf("OPTIONS: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := serve(http.MethodPost, nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}

	// Another card, another ETag; MaxAge is honoured.
	card2 := *card
	card2.Description = "changed"
	h2, _ := AgentCardHandler(&card2, AgentCardOptions{MaxAge: time.Hour})
	w := httptest.NewRecorder()
	h2.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if e := w.Header().Get("ETag"); e == etag || e == "" {
		t.Errorf("a changed card has ETag %q, the first had %q", e, etag)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "public, max-age=3600" {
		t.Errorf("MaxAge 1h: Cache-Control %q", cc)
	}
	h3, _ := AgentCardHandler(card, AgentCardOptions{MaxAge: -1})
	w = httptest.NewRecorder()
	h3.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("MaxAge -1: Cache-Control %q, want no-cache", cc)
	}
}
