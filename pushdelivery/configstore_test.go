package pushdelivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/pushdelivery"
)

func newConfigStore(t *testing.T) (*pushdelivery.ConfigStore, *pushdelivery.Local, *memstore.Store) {
	s := memstore.New(memstore.Options{})
	o := pushdelivery.NewMemory(s, pushdelivery.LocalOptions{})
	return pushdelivery.NewConfigStore(o, s), o, s
}

// valid is a configuration every guard accepts; each case below breaks
// one rule of it.
func valid() *a2a.PushConfig {
	return &a2a.PushConfig{ID: "c1", URL: "https://hook.example/x", Token: "t",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "secret"}}
}

func TestConfigStoreSaveGuards(t *testing.T) {
	cases := []struct {
		name string
		edit func(c *a2a.PushConfig)
		ok   bool
	}{
		{"valid", func(c *a2a.PushConfig) {}, true},
		{"url-relative", func(c *a2a.PushConfig) { c.URL = "/hook" }, false},
		{"url-scheme-ftp", func(c *a2a.PushConfig) { c.URL = "ftp://hook.example/x" }, false},
		{"url-scheme-javascript", func(c *a2a.PushConfig) { c.URL = "javascript:alert(1)" }, false},
		{"url-scheme-upper-ok", func(c *a2a.PushConfig) { c.URL = "HTTPS://hook.example/x" }, true},
		{"url-no-host", func(c *a2a.PushConfig) { c.URL = "https:///x" }, false},
		{"url-opaque", func(c *a2a.PushConfig) { c.URL = "http:hook.example" }, false},
		{"url-port-only", func(c *a2a.PushConfig) { c.URL = "http://:8080/x" }, false},
		{"url-userinfo", func(c *a2a.PushConfig) { c.URL = "https://u:p@hook.example/x" }, false},
		{"url-user-only", func(c *a2a.PushConfig) { c.URL = "https://u@hook.example/x" }, false},
		{"url-unparsable", func(c *a2a.PushConfig) { c.URL = "https://hook.example/%zz" }, false},
		{"url-2048-ok", func(c *a2a.PushConfig) { c.URL = pad("https://hook.example/", 2048) }, true},
		{"url-2049", func(c *a2a.PushConfig) { c.URL = pad("https://hook.example/", 2049) }, false},
		{"id-128-ok", func(c *a2a.PushConfig) { c.ID = strings.Repeat("i", 128) }, true},
		{"id-129", func(c *a2a.PushConfig) { c.ID = strings.Repeat("i", 129) }, false},
		{"id-nul", func(c *a2a.PushConfig) { c.ID = "a\x00" }, false},
		{"id-space", func(c *a2a.PushConfig) { c.ID = "a b" }, false},
		{"id-newline", func(c *a2a.PushConfig) { c.ID = "a\n" }, false},
		{"id-del", func(c *a2a.PushConfig) { c.ID = "a\x7f" }, false},
		{"id-non-ascii", func(c *a2a.PushConfig) { c.ID = "é" }, false},
		{"token-1024-ok", func(c *a2a.PushConfig) { c.Token = strings.Repeat("t", 1024) }, true},
		{"token-1025", func(c *a2a.PushConfig) { c.Token = strings.Repeat("t", 1025) }, false},
		{"auth-none-ok", func(c *a2a.PushConfig) { c.Auth = nil }, true},
		{"auth-basic-lower-ok", func(c *a2a.PushConfig) { c.Auth.Scheme = "basic" }, true},
		{"auth-scheme-digest", func(c *a2a.PushConfig) { c.Auth.Scheme = "Digest" }, false},
		{"auth-scheme-empty", func(c *a2a.PushConfig) { c.Auth.Scheme = "" }, false},
		{"auth-no-credentials", func(c *a2a.PushConfig) { c.Auth.Credentials = "" }, false},
		{"auth-credentials-4096-ok", func(c *a2a.PushConfig) { c.Auth.Credentials = strings.Repeat("c", 4096) }, true},
		{"auth-credentials-4097", func(c *a2a.PushConfig) { c.Auth.Credentials = strings.Repeat("c", 4097) }, false},
		// Header-safe secrets (N4: what is stored can be sent).
		{"token-crlf", func(c *a2a.PushConfig) { c.Token = "t\r\nX-Injected: 1" }, false},
		{"token-lf", func(c *a2a.PushConfig) { c.Token = "t\n" }, false},
		{"token-nul", func(c *a2a.PushConfig) { c.Token = "t\x00" }, false},
		{"token-tab", func(c *a2a.PushConfig) { c.Token = "t\tu" }, false},
		{"token-del", func(c *a2a.PushConfig) { c.Token = "t\x7f" }, false},
		{"token-non-ascii", func(c *a2a.PushConfig) { c.Token = "té" }, false},
		{"token-leading-space", func(c *a2a.PushConfig) { c.Token = " t" }, false},
		{"token-trailing-space", func(c *a2a.PushConfig) { c.Token = "t " }, false},
		{"token-inner-space-ok", func(c *a2a.PushConfig) { c.Token = "t u~!" }, true},
		{"token-empty-ok", func(c *a2a.PushConfig) { c.Token = "" }, true},
		{"auth-credentials-crlf", func(c *a2a.PushConfig) { c.Auth.Credentials = "c\r\nX: 1" }, false},
		{"auth-credentials-nul", func(c *a2a.PushConfig) { c.Auth.Credentials = "c\x00" }, false},
		{"auth-credentials-esc", func(c *a2a.PushConfig) { c.Auth.Credentials = "c\x1b" }, false},
		{"auth-credentials-trailing-space", func(c *a2a.PushConfig) { c.Auth.Credentials = "c " }, false},
		// Ports that can be dialled.
		{"url-port-1-ok", func(c *a2a.PushConfig) { c.URL = "https://hook.example:1/x" }, true},
		{"url-port-65535-ok", func(c *a2a.PushConfig) { c.URL = "https://hook.example:65535/x" }, true},
		{"url-port-0", func(c *a2a.PushConfig) { c.URL = "https://hook.example:0/x" }, false},
		{"url-port-65536", func(c *a2a.PushConfig) { c.URL = "https://hook.example:65536/x" }, false},
		{"url-port-99999", func(c *a2a.PushConfig) { c.URL = "https://hook.example:99999/x" }, false},
		{"url-port-huge", func(c *a2a.PushConfig) { c.URL = "https://hook.example:99999999999999999999/x" }, false},
		{"url-port-empty-ok", func(c *a2a.PushConfig) { c.URL = "https://hook.example:/x" }, true},
		// The tenant a2a-go copies from the request.
		{"tenant-256-ok", func(c *a2a.PushConfig) { c.Tenant = strings.Repeat("t", 256) }, true},
		{"tenant-257", func(c *a2a.PushConfig) { c.Tenant = strings.Repeat("t", 257) }, false},
		{"tenant-3mib", func(c *a2a.PushConfig) { c.Tenant = strings.Repeat("t", 3<<20) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs, _, _ := newConfigStore(t)
			c := valid()
			tc.edit(c)
			// One rule (N4): Check and Validate answer as Save does.
			if err := cs.Check(context.Background(), "t1", c); tc.ok != (err == nil) {
				t.Fatalf("check: %v, want ok=%v", err, tc.ok)
			}
			if err := pushdelivery.Validate(c); tc.ok != (err == nil) {
				t.Fatalf("validate: %v, want ok=%v", err, tc.ok)
			}
			_, err := cs.Save(context.Background(), "t1", c)
			if tc.ok != (err == nil) {
				t.Fatalf("save: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("save: %v, want ErrInvalidParams", err)
			}
			if all, _ := cs.List(context.Background(), "t1"); tc.ok != (len(all) == 1) {
				t.Fatalf("stored %d configs", len(all))
			}
		})
	}
}

// pad fills s with "a" to n bytes.
func pad(s string, n int) string { return s + strings.Repeat("a", n-len(s)) }

func TestConfigStoreSaveNil(t *testing.T) {
	cs, _, _ := newConfigStore(t)
	if _, err := cs.Save(context.Background(), "t1", nil); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("nil config: %v", err)
	}
}

// A config saved without an ID takes its task's ID: saving it again
// replaces it (one default webhook per task, as a retried SendMessage
// saves its config again); a task ID that is no valid config ID gets a
// random one.
func TestConfigStoreDefaultID(t *testing.T) {
	cs, _, _ := newConfigStore(t)
	ctx := context.Background()
	for range 2 {
		c := valid()
		c.ID = ""
		got, err := cs.Save(ctx, "t1", c)
		if err != nil || got.ID != "t1" || got.TaskID != "t1" {
			t.Fatalf("saved without ID: %+v, %v; want ID t1", got, err)
		}
	}
	if all, err := cs.List(ctx, "t1"); err != nil || len(all) != 1 {
		t.Fatalf("after two saves without ID: %d configs, %v; want 1", len(all), err)
	}
	seen := map[string]bool{}
	for range 2 {
		c := valid()
		c.ID = ""
		got, err := cs.Save(ctx, "task with spaces", c)
		if err != nil || len(got.ID) < 26 || seen[got.ID] {
			t.Fatalf("saved without ID on a task whose ID is no config ID: %+v, %v", got, err)
		}
		seen[got.ID] = true
	}
}

// A config saved on an existing task starts after the task's revision;
// on a task not written yet, at 0.
func TestConfigStoreStartsAtTaskRevision(t *testing.T) {
	ctx := context.Background()
	cs, o, s := newConfigStore(t)
	newTask(t, s, "t1")
	for range 2 {
		if _, err := s.Replace(ctx, &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	for task, want := range map[a2a.TaskID]int64{"t1": 3, "later": 0} {
		if _, err := cs.Save(ctx, task, valid()); err != nil {
			t.Fatal(err)
		}
		if r, err := o.Get(ctx, task, "c1"); err != nil || r.Delivered != want {
			t.Fatalf("%s: delivered %v, %v; want %d", task, r, err, want)
		}
	}
}

func TestConfigStoreDest(t *testing.T) {
	cases := map[string]string{
		"https://Hook.Example/x":      "https://hook.example:443",
		"http://hook.example/x":       "http://hook.example:80",
		"HTTP://hook.example:8080/x":  "http://hook.example:8080",
		"https://[::1]/x":             "https://[::1]:443",
		"https://hook.example:443/?q": "https://hook.example:443",
	}
	ctx := context.Background()
	for url, want := range cases {
		cs, o, _ := newConfigStore(t)
		c := valid()
		c.URL = url
		if _, err := cs.Save(ctx, "t1", c); err != nil {
			t.Fatal(err)
		}
		if r, _ := o.Get(ctx, "t1", "c1"); r.Dest != want {
			t.Errorf("%s: dest %q, want %q", url, r.Dest, want)
		}
	}
}

func TestConfigStoreErrors(t *testing.T) {
	ctx := context.Background()
	cs, _, _ := newConfigStore(t)
	if _, err := cs.Get(ctx, "t1", "nope"); !errors.Is(err, push.ErrPushConfigNotFound) {
		t.Fatalf("missing: %v, want ErrPushConfigNotFound", err)
	}
	for i := range pushdelivery.MaxConfigsPerTask {
		c := valid()
		c.ID = fmt.Sprint(i)
		if _, err := cs.Save(ctx, "t1", c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.Save(ctx, "t1", valid()); !errors.Is(err, a2a.ErrInvalidParams) || !errors.Is(err, pushdelivery.ErrTooMany) {
		t.Fatalf("one too many: %v, want ErrInvalidParams", err)
	}
}

// pageIDs walks the task's configurations by pages of size.
func pageIDs(t *testing.T, cs *pushdelivery.ConfigStore, task a2a.TaskID, size int, token string) (ids []string, pages int) {
	t.Helper()
	for {
		page, next, err := cs.ListPage(context.Background(), task, size, token)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, c := range page {
			ids = append(ids, c.ID)
		}
		if next == "" {
			return ids, pages
		}
		if len(page) == 0 || pages > 100 {
			t.Fatalf("token %q after an empty page", next)
		}
		token = next
	}
}

func saveIDs(t *testing.T, cs *pushdelivery.ConfigStore, task a2a.TaskID, ids ...string) {
	t.Helper()
	for _, id := range ids {
		c := valid()
		c.ID = id
		if _, err := cs.Save(context.Background(), task, c); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConfigStoreListPageWalk(t *testing.T) {
	cs, _, _ := newConfigStore(t)
	var want []string
	for i := range pushdelivery.MaxConfigsPerTask {
		want = append(want, fmt.Sprintf("%c", 'z'-i))
	}
	saveIDs(t, cs, "t1", want...)
	slices.Sort(want)
	for size, pages := range map[int]int{1: 16, 5: 4, 16: 1, 0: 1, 1000: 1} {
		got, n := pageIDs(t, cs, "t1", size, "")
		if !slices.Equal(got, want) || n != pages {
			t.Errorf("size %d: %d pages %q, want %d pages %q", size, n, got, pages, want)
		}
	}
	if _, _, err := cs.ListPage(context.Background(), "t1", -1, ""); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("negative page size: %v", err)
	}
}

func TestConfigStoreListPageTokenTampering(t *testing.T) {
	cs, _, _ := newConfigStore(t)
	saveIDs(t, cs, "t1", "a", "b", "c")
	_, next, err := cs.ListPage(context.Background(), "t1", 1, "")
	if err != nil || next == "" {
		t.Fatalf("first page: %q, %v", next, err)
	}
	for _, tok := range []string{"garbage", "pc1.", "pc1.!!", "pc2." + next[4:], next + "=", "pc1.AA", next[4:], " " + next} {
		if _, _, err := cs.ListPage(context.Background(), "t1", 1, tok); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("token %q: %v, want ErrInvalidParams", tok, err)
		}
	}
}

// One task's configurations are never seen, changed or paged into through
// another task's ID.
func TestConfigStoreTasksApart(t *testing.T) {
	ctx := context.Background()
	cs, _, _ := newConfigStore(t)
	saveIDs(t, cs, "t1", "a", "b", "c")
	saveIDs(t, cs, "t2", "x")
	if _, err := cs.Get(ctx, "t2", "a"); !errors.Is(err, push.ErrPushConfigNotFound) {
		t.Fatalf("t1's config through t2: %v", err)
	}
	_, next, _ := cs.ListPage(ctx, "t1", 1, "")
	if got, _ := pageIDs(t, cs, "t2", 1, next); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("t1's token on t2 lists %q", got)
	}
	if err := cs.Delete(ctx, "t2", "a"); err != nil {
		t.Fatal(err)
	}
	if err := cs.DeleteAll(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	if all, _ := cs.List(ctx, "t1"); len(all) != 3 {
		t.Fatalf("t2's deletes reached t1: %d left", len(all))
	}
}

// N3: a save that fails blanks the given config's token and credentials
// (a2a-go formats that config into its error); one that succeeds leaves
// it as it was.
func TestConfigStoreFailedSaveRedacts(t *testing.T) {
	ctx := context.Background()
	cs, _, _ := newConfigStore(t)
	for i := range pushdelivery.MaxConfigsPerTask {
		c := valid()
		c.ID = fmt.Sprint(i)
		if _, err := cs.Save(ctx, "t1", c); err != nil || c.Token != "t" || c.Auth.Credentials != "secret" {
			t.Fatalf("save %d: %v; the config given became %+v", i, err, c)
		}
	}
	over, bad, userinfo := valid(), valid(), valid()
	over.URL = "https://hook.example/PATHSECRET?sig=QUERYSECRET#FRAGSECRET"
	bad.URL = "ftp://hook.example/"
	userinfo.URL = "https://user:PWSECRET@hook.example/"
	for name, c := range map[string]*a2a.PushConfig{"over the cap": over, "invalid": bad, "userinfo": userinfo} {
		auth := c.Auth
		if _, err := cs.Save(ctx, "t1", c); err == nil {
			t.Fatalf("%s: saved", name)
		}
		if c.Token != "" || c.Auth == nil || c.Auth.Credentials != "" || c.Auth.Scheme != "Bearer" {
			t.Errorf("%s: after the failed save the config is %+v, auth %+v", name, c, c.Auth)
		}
		// Review D: nor the URL past its host (a query or a path may be
		// the webhook's secret, the user information is a credential):
		// a2a-go prints the config into its error, logged.
		if strings.Contains(fmt.Sprintf("%v %+v", c, c), "SECRET") {
			t.Errorf("%s: after the failed save the config's URL is %q", name, c.URL)
		}
		if auth.Credentials != "secret" {
			t.Errorf("%s: the caller's auth object was changed", name)
		}
	}
}

// N2, N4: a config without an ID takes the task's ID, so on a task at the
// cap whose default config exists it replaces that one: Check accepts it
// as Save does, and refuses it as Save does when the task has no default
// config.
func TestConfigStoreCheckDefaultIDAtCap(t *testing.T) {
	ctx := context.Background()
	cs, _, _ := newConfigStore(t)
	for _, task := range []a2a.TaskID{"with-default", "without"} {
		for i := range pushdelivery.MaxConfigsPerTask {
			c := valid()
			c.ID = fmt.Sprint(i)
			if i == 0 && task == "with-default" {
				c.ID = string(task)
			}
			if _, err := cs.Save(ctx, task, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	for task, ok := range map[a2a.TaskID]bool{"with-default": true, "without": false} {
		c := valid()
		c.ID = ""
		checkErr := cs.Check(ctx, task, c)
		_, saveErr := cs.Save(ctx, task, c)
		if (checkErr == nil) != ok || (saveErr == nil) != ok {
			t.Errorf("%s: check %v, save %v; want ok=%v from both", task, checkErr, saveErr, ok)
		}
	}
}

// List of a task without configs is an empty list, not nil, as a2a-go's
// in-memory store answers.
func TestConfigStoreListEmpty(t *testing.T) {
	cs, _, _ := newConfigStore(t)
	if got, err := cs.List(context.Background(), "none"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("List of a task without configs = %#v, %v; want an empty list", got, err)
	}
}
