package notify

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// Config is a notifications file (tollgate serve --notify-config FILE):
// the channels, configured once, and the groups a policy's rules name in
// notify: and escalate:. Secrets are never in the file: each is read from
// an environment variable (…_env) or a file (…_file), so that no secret
// is on a command line (visible in /proc) or in a file a policy author
// shares.
//
//	base_url: https://tollgate.example.com   # links in messages
//	default: [team-infra]                    # told of questions whose rule names nobody
//	near_deadline: 1m                        # question.deadline_near, for rules without escalate:
//	action_secret_env: TOLLGATE_ACTION_SECRET # signs Slack buttons and mail links (replicas share it)
//	slack:
//	  token_env: SLACK_BOT_TOKEN
//	  signing_secret_env: SLACK_SIGNING_SECRET
//	  reviewers: {U0123ABCD: alice}           # whose button presses answer, by Slack user id
//	smtp:
//	  host: smtp.example.com
//	  port: 587
//	  username: tollgate
//	  password_env: SMTP_PASSWORD
//	  from: tollgate@example.com
//	  answer_links: true                      # approve/deny links that open a confirmation page
//	groups:
//	  team-infra:
//	    webhooks: [{url: "https://hooks.example.com/tollgate", secret_env: INFRA_WEBHOOK_SECRET}]
//	    slack: [C0INFRA]
//	    email: [infra@example.com]
//	  oncall:
//	    slack: [C0ONCALL]
type Config struct {
	BaseURL      string   `yaml:"base_url"`
	Default      []string `yaml:"default"`
	NearDeadline Duration `yaml:"near_deadline"`
	// ActionSecretEnv / ActionSecretFile: the key that signs Slack
	// buttons and mail links. Without one, a key made at start-up: the
	// links of messages sent before a restart then only open the page.
	ActionSecretEnv  string `yaml:"action_secret_env"`
	ActionSecretFile string `yaml:"action_secret_file"`
	// MaxAttempts is how often a delivery is tried before it is dead
	// (zero: 12, about an hour of backoff).
	MaxAttempts int               `yaml:"max_attempts"`
	Slack       *SlackConfig      `yaml:"slack"`
	SMTP        *SMTPConfig       `yaml:"smtp"`
	Groups      map[string]*Group `yaml:"groups"`
	secrets     map[string][]byte // read by Load: by the field's name
	files       []string          // secret files named, for the caller's checks
}

// SlackConfig is the Slack app tollgate posts as.
type SlackConfig struct {
	TokenEnv          string `yaml:"token_env"`
	TokenFile         string `yaml:"token_file"`
	SigningSecretEnv  string `yaml:"signing_secret_env"`
	SigningSecretFile string `yaml:"signing_secret_file"`
	// APIURL is Slack's Web API (zero: https://slack.com/api/); tests
	// point it at a fake.
	APIURL string `yaml:"api_url"`
	// Reviewers maps Slack user ids to the names their answers are
	// recorded under. A press by anyone else opens the page instead of
	// answering. Empty: nobody answers from Slack.
	Reviewers map[string]string `yaml:"reviewers"`
}

// SMTPConfig is the mail server tollgate sends through.
type SMTPConfig struct {
	Host         string `yaml:"host"`
	Port         int    `yaml:"port"`
	Username     string `yaml:"username"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	From         string `yaml:"from"`
	// TLS is "starttls" (the default), "tls" (implicit, port 465) or
	// "none", which only a loopback host may use.
	TLS string `yaml:"tls"`
	// AnswerLinks adds one-time approve and deny links to each message;
	// each opens a confirmation page, which answers only when its button
	// is pressed (mail scanners follow links: a GET never answers).
	AnswerLinks bool `yaml:"answer_links"`
}

// Group is who is told: a rule's notify: and escalate: name groups.
type Group struct {
	Webhooks []*Webhook `yaml:"webhooks"`
	Slack    []string   `yaml:"slack"`
	Email    []string   `yaml:"email"`
}

// Webhook is one endpoint, signed per the Standard Webhooks spec with its
// secret ("whsec_" and base64).
type Webhook struct {
	URL        string `yaml:"url"`
	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
	key        []byte
}

// Duration is a YAML duration ("90s", "2m").
type Duration time.Duration

// UnmarshalText reads a duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q: want one such as 90s or 2m", b)
	}
	if v < 0 {
		return fmt.Errorf("bad duration %q: must not be negative", b)
	}
	*d = Duration(v)
	return nil
}

// Load reads a notifications file and the secrets it names, from getenv
// (nil: os.Getenv) and from files.
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, getenv)
}

// Parse is [Load] of data; name is used in error messages.
func Parse(name string, data []byte, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var c Config
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("%s: %s", name, yaml.FormatError(err, false, true))
	}
	c.secrets = map[string][]byte{}
	p := &parse{name: name, getenv: getenv, c: &c}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.bad("base_url %q: want http(s)://host[:port][/path]", c.BaseURL)
		}
		c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	}
	if k := p.secret("action_secret", c.ActionSecretEnv, c.ActionSecretFile, false); k != nil {
		if len(k) < 32 {
			p.bad("action_secret: at least 32 bytes (this one has %d): make one with head -c 32 /dev/urandom | base64", len(k))
		}
		c.secrets["action"] = k
	}
	if c.MaxAttempts < 0 {
		p.bad("max_attempts %d: must not be negative", c.MaxAttempts)
	}
	if s := c.Slack; s != nil {
		p.slack(s)
	}
	if s := c.SMTP; s != nil {
		p.smtp(s)
	}
	for _, g := range c.Default {
		if c.Groups[g] == nil {
			p.bad("default names group %q, which groups does not define", g)
		}
	}
	for name, g := range c.Groups {
		p.group(name, g)
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return &c, nil
}

// parse is one [Parse]: the configuration read so far and every problem
// found in it, so that all are reported at once.
type parse struct {
	name   string
	getenv func(string) string
	c      *Config
	errs   []error
}

func (p *parse) bad(format string, a ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: "+format, append([]any{p.name}, a...)...))
}

// secret reads the secret what from the environment variable env or the
// file (relative to the configuration's folder); nil when neither is
// given or it cannot be read.
func (p *parse) secret(what, env, file string, required bool) []byte {
	switch {
	case env != "" && file != "":
		p.bad("%s: give %s_env or %s_file, not both", what, what, what)
	case env != "":
		v := p.getenv(env)
		if v == "" {
			p.bad("%s: the environment variable %s is empty or not set", what, env)
		}
		return []byte(v)
	case file != "":
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(p.name), file)
		}
		p.c.files = append(p.c.files, file)
		b, err := os.ReadFile(file)
		if err != nil {
			p.bad("%s: %v", what, err)
			return nil
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			p.bad("%s: the file %s is empty", what, file)
		}
		return b
	case required:
		p.bad("%s: name its environment variable (%s_env) or file (%s_file)", what, what, what)
	}
	return nil
}

func (p *parse) slack(s *SlackConfig) {
	if k := p.secret("token", s.TokenEnv, s.TokenFile, true); k != nil {
		p.c.secrets["slack_token"] = k
	}
	if k := p.secret("signing_secret", s.SigningSecretEnv, s.SigningSecretFile, true); k != nil {
		p.c.secrets["slack_signing"] = k
	}
	if s.APIURL != "" {
		if err := checkURL(s.APIURL); err != nil {
			p.bad("slack: api_url: %v", err)
		}
		if !strings.HasSuffix(s.APIURL, "/") {
			s.APIURL += "/"
		}
	}
}

func (p *parse) smtp(s *SMTPConfig) {
	if s.Host == "" || s.From == "" {
		p.bad("smtp: host and from are required")
	}
	if s.Port == 0 {
		s.Port = 587
	}
	switch s.TLS {
	case "":
		s.TLS = "starttls"
	case "starttls", "tls":
	case "none":
		if !loopbackHost(s.Host) {
			p.bad("smtp: tls none sends the password and the messages in the clear: only to a loopback host, not %q", s.Host)
		}
	default:
		p.bad("smtp: tls %q: want starttls, tls or none", s.TLS)
	}
	if s.Username != "" {
		if k := p.secret("password", s.PasswordEnv, s.PasswordFile, true); k != nil {
			p.c.secrets["smtp_password"] = k
		}
	}
	if s.AnswerLinks && p.c.BaseURL == "" {
		p.bad("smtp: answer_links needs base_url (the links open this server's confirmation page)")
	}
}

func (p *parse) group(name string, g *Group) {
	if g == nil {
		p.bad("group %q is empty", name)
		return
	}
	for i, w := range g.Webhooks {
		if err := checkURL(w.URL); err != nil {
			p.bad("group %q: webhook %d: %v", name, i+1, err)
			continue
		}
		k := p.secret("secret", w.SecretEnv, w.SecretFile, true)
		if k == nil {
			continue
		}
		key, err := webhookKey(string(k))
		if err != nil {
			p.bad("group %q: webhook %s: %v", name, w.URL, err)
		}
		w.key = key
	}
	if len(g.Slack) > 0 && p.c.Slack == nil {
		p.bad("group %q names Slack channels, and there is no slack: section", name)
	}
	if len(g.Email) > 0 && p.c.SMTP == nil {
		p.bad("group %q names mail addresses, and there is no smtp: section", name)
	}
	for _, a := range g.Email {
		if !strings.Contains(a, "@") || strings.ContainsAny(a, "\r\n<> ") {
			p.bad("group %q: %q is not a mail address", name, a)
		}
	}
}

// SecretFiles are the files the configuration read its secrets from
// (tollgate serve refuses them inside the bash tool's directory, as it
// refuses the store and the policy there).
func (c *Config) SecretFiles() []string { return slices.Clone(c.files) }

// Answers reports whether messages carry actions that answer (Slack
// reviewers, mail answer links), and whether their key is configured
// (without one each process makes its own: replicas do not share it).
func (c *Config) Answers() (answers, keyed bool) {
	answers = c.Slack != nil && len(c.Slack.Reviewers) > 0 || c.SMTP != nil && c.SMTP.AnswerLinks
	return answers, c.secrets["action"] != nil
}

// GroupNames are the groups defined, sorted.
func (c *Config) GroupNames() []string {
	var out []string
	for n := range c.Groups {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// webhookKey reads a Standard Webhooks secret: "whsec_" and the key in
// base64.
func webhookKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New(`the secret must be "whsec_" and the key in base64 (make one with: echo whsec_$(head -c 32 /dev/urandom | base64))`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the secret after whsec_ is not base64: %v", err)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("the key is %d bytes: the spec wants 24 to 64", len(key))
	}
	return key, nil
}

// checkURL refuses what is not an http(s) URL with a host: a webhook URL
// comes from the operator's file, not the agent, but a file:, gopher: or
// unix: URL is no webhook.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: only http and https URLs are sent to, not %q", raw, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	if u.User != nil {
		return fmt.Errorf("%q holds a user or password: sign with the webhook's secret instead", redactURL(u))
	}
	return nil
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
