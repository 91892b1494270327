package pushdelivery

import (
	"crypto/rand"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Limits of a push configuration (SPEC N4: every field bounded), one rule
// that ConfigStore.Check, ConfigStore.Save and Validate share: what one
// accepts the others accept, and delivery can send (header-safe secrets,
// a port to dial).
const (
	MaxURLBytes         = 2048
	MaxConfigIDBytes    = 128
	MaxTokenBytes       = 1024
	MaxCredentialsBytes = 4096
	// MaxTenantBytes bounds the tenant a2a-go copies into a config from
	// the request (echoed back on every read of the config).
	MaxTenantBytes = 256
)

// normalize is the configuration Save stores for task: a copy of config
// with the task's ID and, when it has none, the default ID (defaultID),
// and its Dest; or an error wrapping a2a.ErrInvalidParams naming the rule
// it breaks, never the token or the credentials.
func normalize(task a2a.TaskID, config *a2a.PushConfig) (a2a.PushConfig, string, error) {
	if config == nil {
		return a2a.PushConfig{}, "", invalid("missing")
	}
	cfg := *config
	if cfg.Auth != nil {
		auth := *cfg.Auth
		cfg.Auth = &auth
	}
	cfg.TaskID = task
	if cfg.ID == "" {
		cfg.ID = defaultID(task)
	}
	dest, err := validateConfig(&cfg)
	return cfg, dest, err
}

// defaultID is the ID of a configuration saved without one: the task's
// ID (as the official Python SDK does: A2A's config ID exists "to support
// multiple notification callbacks", so a task has one default callback,
// and a save repeated — a2a-go's cluster mode saves a SendMessage's
// config again at each retry of its execution — replaces it instead of
// adding a second webhook that would get every event twice); a random
// one when the task ID is not a valid config ID (N2).
func defaultID(task a2a.TaskID) string {
	if validateID(string(task)) == nil {
		return string(task)
	}
	return rand.Text() // 26 base32 characters: 130 random bits
}

// Validate checks a push configuration as Save does for a new task,
// without storing it: nil, or an error wrapping a2a.ErrInvalidParams that
// names neither the token nor the credentials.
func Validate(cfg *a2a.PushConfig) error {
	_, _, err := normalize("", cfg)
	return err
}

// validateConfig checks cfg, its ID given, against the limits and returns
// its Dest.
func validateConfig(cfg *a2a.PushConfig) (string, error) {
	if err := validateID(cfg.ID); err != nil {
		return "", err
	}
	if len(cfg.Tenant) > MaxTenantBytes {
		return "", invalid("tenant longer than %d bytes", MaxTenantBytes)
	}
	dest, err := validateURL(cfg.URL)
	if err != nil {
		return "", err
	}
	if len(cfg.Token) > MaxTokenBytes || !headerSafe(cfg.Token) {
		return "", invalid("token must be at most %d bytes of printable ASCII, no space at either end", MaxTokenBytes)
	}
	if a := cfg.Auth; a != nil {
		if !strings.EqualFold(a.Scheme, "Bearer") && !strings.EqualFold(a.Scheme, "Basic") {
			return "", invalid("authentication scheme must be Bearer or Basic")
		}
		if a.Credentials == "" || len(a.Credentials) > MaxCredentialsBytes || !headerSafe(a.Credentials) {
			return "", invalid("authentication credentials must be 1 to %d bytes of printable ASCII, no space at either end", MaxCredentialsBytes)
		}
	}
	return dest, nil
}

// headerSafe reports whether s is sent unchanged as an HTTP header value:
// printable ASCII (0x20 to 0x7E: no CR, LF, NUL, tab or other control
// character, which net/http refuses to send or a receiver splits on), with
// no space at either end (net/http trims it, so the receiver would get
// another value).
func headerSafe(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s == strings.TrimSpace(s)
}

// validateID accepts 1 to MaxConfigIDBytes bytes of visible ASCII.
func validateID(id string) error {
	if len(id) == 0 || len(id) > MaxConfigIDBytes {
		return invalid("ID must be 1 to %d bytes", MaxConfigIDBytes)
	}
	for i := range len(id) {
		if id[i] < 0x21 || id[i] > 0x7e {
			return invalid("ID must be visible ASCII (0x21 to 0x7E)")
		}
	}
	return nil
}

// validateURL accepts an absolute http or https URL with a host, a port
// from 1 to 65535 (or none) and no user information, and returns its
// destination scheme://host:port.
func validateURL(s string) (string, error) {
	if len(s) > MaxURLBytes {
		return "", invalid("URL longer than %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", invalid("URL does not parse")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", invalid("URL must be absolute, http or https")
	}
	if u.Hostname() == "" {
		return "", invalid("URL has no host")
	}
	if u.User != nil {
		return "", invalid("URL must not carry user information")
	}
	port := map[string]int{"http": 80, "https": 443}[scheme]
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return "", invalid("URL port must be 1 to 65535")
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), strconv.Itoa(port)), nil
}
