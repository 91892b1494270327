package pushdelivery

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2astore/a2astore/engine"
)

// Page sizes of ConfigStore.ListPage: 0 means DefaultPageSize, a larger
// size than MaxPageSize is clamped to it.
const (
	DefaultPageSize = 16
	MaxPageSize     = 100
)

// pageTokenPrefix versions ListPage's token: the prefix, then the
// base64url (unpadded) of the last configuration ID of the page.
const pageTokenPrefix = "pc1."

// ConfigStore is a2a-go's push.ConfigStore over an Outbox: Save validates
// the configuration (bad input answers a2a.ErrInvalidParams and stores
// nothing), gives it an ID when it has none, and starts its delivery
// cursor at the task's current revision, so that a webhook receives the
// events after its registration.
//
// It does not check who may see the task: the server's TaskGuard answers
// not-found for a task the caller cannot see before any push-config call
// reaches the store.
type ConfigStore struct {
	o     Outbox
	s     engine.Store
	clock func() time.Time
}

var _ push.ConfigStore = (*ConfigStore)(nil)

// NewConfigStore returns the push-config store over o, reading task
// revisions from s.
func NewConfigStore(o Outbox, s engine.Store) *ConfigStore {
	return &ConfigStore{o: o, s: s, clock: time.Now}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: push config: %s", a2a.ErrInvalidParams, fmt.Sprintf(format, args...))
}

// Save implements push.ConfigStore. When it fails (invalid config, too
// many, a store error) it blanks config's token and credentials in place
// before it returns (SPEC N3): a2a-go v2.3.1 formats the config it passed
// into the error of a failed SendMessage ("failed to save push config
// %v"), which the client gets and the logs print. Nothing was stored then,
// and the request fails; a2a-go's cluster mode decodes a retried
// execution's config afresh from its work item.
func (c *ConfigStore) Save(ctx context.Context, task a2a.TaskID, config *a2a.PushConfig) (_ *a2a.PushConfig, err error) {
	defer func() {
		if err != nil {
			redact(config)
		}
	}()
	return c.save(ctx, task, config)
}

// redact blanks cfg's token and credentials, and cuts its URL to the
// scheme and host (user information is a credential; a path or a query
// may be the webhook's secret, and logs say no more than the host) (nil:
// nothing).
func redact(cfg *a2a.PushConfig) {
	if cfg == nil {
		return
	}
	cfg.URL = redactURL(cfg.URL)
	cfg.Token = ""
	if cfg.Auth != nil {
		cfg.Auth = &a2a.PushAuthInfo{Scheme: cfg.Auth.Scheme}
	}
}

// redactURL is s cut to its scheme and host ("" when it does not parse).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
}

// save is Save without the redaction.
func (c *ConfigStore) save(ctx context.Context, task a2a.TaskID, config *a2a.PushConfig) (*a2a.PushConfig, error) {
	cfg, dest, err := normalize(task, config)
	if err != nil {
		return nil, err
	}
	// The mark first: a task deleted and created again between the two
	// reads leaves a record of the incarnation deleted (dropped unsent),
	// never one of the earlier incarnation's mark at the later one's
	// revision.
	mark, err := c.mark(ctx, task)
	if err != nil {
		return nil, err
	}
	rev, err := c.revision(ctx, task)
	if err != nil {
		return nil, err
	}
	now := c.clock()
	r := &Record{TaskID: task, Config: cfg, Dest: dest, Created: now, NextAt: now, Delivered: rev, Incarnation: mark}
	if err := c.o.Save(ctx, r); err != nil {
		if errors.Is(err, ErrTooMany) {
			return nil, tooMany()
		}
		return nil, err
	}
	out := cfg
	return &out, nil
}

func tooMany() error {
	return fmt.Errorf("%w: %w (at most %d)", a2a.ErrInvalidParams, ErrTooMany, MaxConfigsPerTask)
}

// Check checks the push configuration a SendMessage on task carries (task
// "": a new task) as Save would, without storing it: Validate's errors,
// and ErrTooMany (wrapping a2a.ErrInvalidParams) when the task has
// MaxConfigsPerTask configurations already, none with cfg's ID. Its
// errors name neither the token nor the credentials: servers call it
// before a2a-go v2.3.1 saves the configuration, so that bad input fails
// before a task is created. A save failing after a passed Check (a
// concurrent create, a store failure) blanks the secrets in the config
// a2a-go formats into its error (Save).
func (c *ConfigStore) Check(ctx context.Context, task a2a.TaskID, cfg *a2a.PushConfig) error {
	norm, _, err := normalize(task, cfg)
	if err != nil || task == "" {
		return err
	}
	recs, err := c.o.List(ctx, task, "", MaxConfigsPerTask)
	if err != nil {
		return err
	}
	if recs, err = c.live(ctx, task, recs); err != nil { // Save removes the others
		return err
	}
	if len(recs) < MaxConfigsPerTask || slices.ContainsFunc(recs, func(r *Record) bool { return r.Config.ID == norm.ID }) {
		return nil
	}
	return tooMany()
}

// revision is the task's current revision, 0 when it does not exist yet.
func (c *ConfigStore) revision(ctx context.Context, task a2a.TaskID) (int64, error) {
	rec, err := c.s.Get(ctx, task)
	if errors.Is(err, engine.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pushdelivery: save push config: read task: %w", err)
	}
	return rec.Revision, nil
}

// mark is the store's mark of the task's last deletion (0: none, or a
// store without a log, which remembers no deletion).
func (c *ConfigStore) mark(ctx context.Context, task a2a.TaskID) (int64, error) {
	return Incarnation(ctx, c.s, task)
}

// live is recs without the records of a deleted incarnation of task
// (SPEC N1: they serve no later task of the ID).
func (c *ConfigStore) live(ctx context.Context, task a2a.TaskID, recs []*Record) ([]*Record, error) {
	return Live(ctx, c.s, task, recs)
}

// Incarnation returns the incarnation of task in store that a record
// saved now belongs to (Record.Incarnation): the store's mark of the
// task's last deletion (engine.LogStore.Deleted), 0 when it remembers
// none or keeps no log (SPEC N1).
func Incarnation(ctx context.Context, store engine.Store, task a2a.TaskID) (int64, error) {
	logs, ok := store.(engine.LogStore)
	if !ok {
		return 0, nil
	}
	m, err := logs.Deleted(ctx, task)
	if errors.Is(err, engine.ErrLogDisabled) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pushdelivery: read task deletions: %w", err)
	}
	return m, nil
}

// Live returns recs, records of task in an outbox over store, without
// those of an incarnation of task that store remembers deleted since
// they were saved (SPEC N1): what serves the task now. An outbox's List
// returns them all until they are removed (by a Save for the task, the
// worker, or Sweep). It reuses recs' array.
func Live(ctx context.Context, store engine.Store, task a2a.TaskID, recs []*Record) ([]*Record, error) {
	if len(recs) == 0 {
		return recs, nil
	}
	mark, err := Incarnation(ctx, store, task)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(recs, func(r *Record) bool { return r.stale(mark) }), nil
}

// errConfigNotFound is Get's answer for a configuration it does not have:
// push.ErrPushConfigNotFound, which a2a-go's transports do not map and
// answer as an internal error, and a2a.ErrTaskNotFound, which they answer
// not found (SPEC W3: -32001, 404, NOT_FOUND).
var errConfigNotFound = fmt.Errorf("%w: %w", push.ErrPushConfigNotFound, a2a.ErrTaskNotFound)

// Get implements push.ConfigStore.
func (c *ConfigStore) Get(ctx context.Context, task a2a.TaskID, id string) (*a2a.PushConfig, error) {
	r, err := c.o.Get(ctx, task, id)
	if errors.Is(err, ErrNotFound) {
		return nil, errConfigNotFound
	}
	if err != nil {
		return nil, err
	}
	live, err := c.live(ctx, task, []*Record{r})
	if err != nil {
		return nil, err
	}
	if len(live) == 0 {
		return nil, errConfigNotFound
	}
	return &r.Config, nil
}

// List implements push.ConfigStore: every configuration of the task, an
// empty list (not nil) when it has none, as a2a-go's own stores answer.
func (c *ConfigStore) List(ctx context.Context, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	out := []*a2a.PushConfig{}
	after := ""
	for {
		page, next, err := c.list(ctx, task, after, MaxPageSize)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// ListPage returns one page of the task's configurations in ascending ID
// order (bytewise) and the token of the next page ("" at the end).
// pageSize 0 is DefaultPageSize; above MaxPageSize it is clamped to
// MaxPageSize; negative is a2a.ErrInvalidParams. token is "" for the
// first page or a token ListPage returned; one that does not decode is
// a2a.ErrInvalidParams. A token is a position (a configuration ID), not
// bound to the task: used on another task it positions among that task's
// configurations and shows nothing else.
func (c *ConfigStore) ListPage(ctx context.Context, task a2a.TaskID, pageSize int, token string) ([]*a2a.PushConfig, string, error) {
	switch {
	case pageSize < 0:
		return nil, "", invalid("negative page size")
	case pageSize == 0:
		pageSize = DefaultPageSize
	case pageSize > MaxPageSize:
		pageSize = MaxPageSize
	}
	after, err := decodePageToken(token)
	if err != nil {
		return nil, "", err
	}
	return c.list(ctx, task, after, pageSize)
}

// list reads a page after the ID after, and the next token.
func (c *ConfigStore) list(ctx context.Context, task a2a.TaskID, after string, pageSize int) ([]*a2a.PushConfig, string, error) {
	recs, err := c.o.List(ctx, task, after, pageSize+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(recs) > pageSize {
		recs = recs[:pageSize]
		next = pageTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(recs[pageSize-1].Config.ID))
	}
	if recs, err = c.live(ctx, task, recs); err != nil { // after the token: a page may come short, not end early
		return nil, "", err
	}
	out := make([]*a2a.PushConfig, len(recs))
	for i, r := range recs {
		out[i] = &r.Config
	}
	return out, next, nil
}

// decodePageToken returns the ID a token holds ("" for no token).
func decodePageToken(token string) (string, error) {
	if token == "" {
		return "", nil
	}
	rest, ok := strings.CutPrefix(token, pageTokenPrefix)
	if !ok {
		return "", invalid("page token not recognised")
	}
	id, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || validateID(string(id)) != nil {
		return "", invalid("page token not recognised")
	}
	return string(id), nil
}

// Delete implements push.ConfigStore (a missing configuration: no error).
func (c *ConfigStore) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	return c.o.Delete(ctx, task, id)
}

// DeleteAll implements push.ConfigStore.
func (c *ConfigStore) DeleteAll(ctx context.Context, task a2a.TaskID) error {
	return c.o.DeleteAll(ctx, task)
}
