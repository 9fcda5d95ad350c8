package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/cluster"
	"github.com/tollgate-ai/tollgate/hooks"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
	"github.com/tollgate-ai/tollgate/mcpgate"
	"github.com/tollgate-ai/tollgate/notify"
	"github.com/tollgate-ai/tollgate/server"
	"github.com/tollgate-ai/tollgate/tools/bash"
)

func init() {
	register("serve", "run the web service: the HTTP API and the reviewer page", serveCmd)
}

const serveHelp = `usage: tollgate serve [flags]

Runs the web service: agents whose every tool call passes a policy, an
HTTP API under /v1 for clients, and the reviewer page at / where people
approve, deny or edit the calls the policy asks about. Runs that wait for
a person hold no memory; they resume when answered, after a restart too.

With no tokens configured and a loopback address the service runs in dev
mode: no authentication, said loudly at start-up and on the page. Flags
marked [NAME] can also be set by that environment variable.

examples:
  tollgate serve
      dev mode on http://127.0.0.1:8080/, the store in ./tollgate.db
  tollgate serve --addr 127.0.0.1:9090 --dev --store sqlite:/var/lib/tollgate/t.db
  tollgate token new --name alice --role reviewer >> tokens.yaml
  tollgate serve --addr :8080 --tokens tokens.yaml --store postgres://tollgate@db.internal/tollgate
      a replica: start the same on other machines, behind one load balancer
  tollgate serve --model anthropic:claude-sonnet-4-6 --policy policy.yaml --dir ~/project --shutdown-grace 30s
`

func serveCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", serveHelp, stderr)
	addr := fs.String("addr", envDefault("TOLLGATE_ADDR", "127.0.0.1:8080"), "the `host:port` to listen on [TOLLGATE_ADDR]")
	storeURL := storeFlag(fs, defaultStore())
	tokensFile := fs.String("tokens", envDefault("TOLLGATE_TOKENS_FILE", ""), "tokens `file` (YAML: tokens: [{name, role, token_sha256, threads}], made with tollgate token new); TOLLGATE_TOKENS=name:role:token,... adds more [TOLLGATE_TOKENS_FILE]")
	stateInDir := fs.Bool("allow-state-in-workdir", false, "start even though the store, the policy or the tokens file is inside the bash tool's --dir: there, an approved or unconfined command can read and rewrite them, and so answer its own questions (confined commands never see them), e.g. --allow-state-in-workdir")
	dev := fs.Bool("dev", envDefault("TOLLGATE_DEV", "") == "1", "dev mode: no authentication (loopback addresses only) [TOLLGATE_DEV=1]")
	var af agentFlags
	af.register(fs, true)
	var mcpf mcpFlags
	mcpf.register(fs.FlagSet)
	hookPolicy := hookPolicyFlag(fs)
	grace := fs.Duration("shutdown-grace", 10*time.Second, "on SIGTERM, how long runs in progress get to finish or park before they are cut off (left resumable)")
	maxStreams := fs.Int("max-streams-per-token", server.DefaultMaxStreamsPerToken, "the most event streams one token (with the page sessions it signed in) keeps open at once; more are refused with 429 too_many_streams (0: no limit), e.g. --max-streams-per-token 64")
	notifyConfig := fs.String("notify-config", envDefault("TOLLGATE_NOTIFY_CONFIG", ""), "notifications `file` (YAML: webhooks, Slack, mail, the groups policy rules name in notify: and escalate:; secrets from the environment or files, see the README's \"Notifications\"), e.g. --notify-config /etc/tollgate/notify.yaml [TOLLGATE_NOTIFY_CONFIG]")
	samePolicy := fs.Bool("require-same-policy", envDefault("TOLLGATE_REQUIRE_SAME_POLICY", "") == "1", "with a postgres:// store: refuse to start when another live replica decides by another policy (its file's digest differs); without it, replicas that differ are warned about in the log, on /readyz and in tollgate_cluster_policy_mismatch, e.g. --require-same-policy [TOLLGATE_REQUIRE_SAME_POLICY=1]")
	lease := fs.Duration("lease", 15*time.Second, "with a postgres:// store, serve is a replica of a cluster (run as many as you like on one database, see the README's \"Several replicas\"): how long the runs of a replica that stops answering stay held before another takes them over, e.g. --lease 30s")
	if code, done := parseFlagsOnly(fs, args, stdout); done {
		return code
	}
	// This process never confines itself (no Landlock domain, seccomp
	// filter, ... of its own): the bash tool may start its helpers ahead.
	bash.UseSpareHelpers(true)
	log := slog.New(slog.NewTextHandler(stderr, nil))

	w := newWiring("tollgate serve", stderr, log)
	defer w.close()
	tokens, mcpConfigs, err := serveChecks(log, *tokensFile, &af, maxStreams, *addr, dev, &mcpf)
	if err != nil {
		return w.fail(withCode(2, err))
	}
	// Bound first: a second serve started by mistake on a busy port must
	// stop before its host resumes anything in the store.
	ln, err := w.listen(*addr)
	if err != nil {
		return w.fail(err)
	}
	if err := storePassword(fs, *storeURL); err != nil {
		return w.fail(err)
	}
	notifyCfg, notices, err := serveState(log, *notifyConfig, *storeURL, *tokensFile, *hookPolicy, *stateInDir, &af)
	if err != nil {
		return w.fail(withCode(2, err))
	}
	s := &serving{af: &af, storeURL: *storeURL, hookPolicy: *hookPolicy, mcpConfigs: mcpConfigs, notifyCfg: notifyCfg, notices: notices,
		lease: *lease, samePolicy: *samePolicy,
		cfg: server.Config{Logger: log, Tokens: tokens, DevMode: *dev, ListenAddr: *addr, MaxStreamsPerToken: *maxStreams, Notices: notices.list}}
	if err := s.wire(ctx, w); err != nil {
		return w.fail(err)
	}
	shownStore := storeurl.Redacted(*storeURL)
	log.Info("tollgate serving", "url", "http://"+ln.Addr().String()+"/", "store", shownStore, "policy", s.lp.name, "model", af.model, "tools_dir", af.dir, "parked_runs", s.h.Stats().Parked)
	log.Info("tollgate: coding agents' hooks at http://"+ln.Addr().String()+"/v1/hooks/claude-code and /v1/hooks/codex (tollgate hook install)", "hook_policy", s.hookLP.name)
	if s.servers != nil {
		fmt.Fprintln(stdout, "tollgate:", mcpSummary(s.servers))
	}
	fmt.Fprintf(stdout, "tollgate %s: open http://%s/ (store %s, policy %s, model %s)\n", version, ln.Addr(), shownStore, s.lp.name, af.model)

	return serveUntilStopped(ctx, ln, s.hs, s.srv, s.h, s.hookSvc, s.servers, s.coord != nil, *grace, log, stdout)
}

// serving is what serve wires from its checked flags (the first fields,
// set by serveCmd) and then serves (those after the blank line, set by
// wire).
type serving struct {
	af                   *agentFlags
	storeURL, hookPolicy string
	mcpConfigs           []mcpgate.ServerConfig
	notifyCfg            *notify.Config
	notices              *noticeBoard
	lease                time.Duration
	samePolicy           bool
	// cfg is the server's configuration as the flags give it.
	cfg server.Config

	servers    *mcpgate.Servers
	lp, hookLP *loadedPolicy
	hookSvc    *hooks.Service
	coord      *cluster.Cluster
	h          *host.Host
	srv        *server.Server
	hs         *http.Server
}

// wire opens serve's store (made where it is not yet), connects the MCP
// servers, makes the agent's template with their tools (saying how the
// bash tool is confined) and the coding agents' hook service, then starts
// the host with them, the notifications, and the server of the API and
// the page. What it made w closes.
func (s *serving) wire(ctx context.Context, w *wiring) error {
	log := w.log
	// serve's policy and the hooks' are reloaded as --policy-reload says;
	// a reload that loosens either is a notice.
	watch, err := w.watch(ctx, s.af.reload, s.af.loosened)
	if err != nil {
		return err
	}
	store, err := w.openStore(ctx, s.storeURL, "", defaultStore())
	if err != nil {
		return err
	}
	// The MCP servers' tools are known before the agent is made; the
	// servers are closed once the host has stopped.
	if s.servers, err = w.connectMCP(ctx, s.mcpConfigs, func(line string) { log.Warn(line) }); err != nil {
		return err
	}
	tmpl, lp, err := s.af.template(ctx, store, log, watch)
	if err == nil {
		tmpl, err = withMCP(tmpl, s.servers)
	}
	if err != nil {
		return withCode(2, err)
	}
	s.lp = lp
	if line := s.af.sandbox.startupLine(); s.af.sandbox.unconfined() {
		log.Warn("tollgate: " + line)
	} else {
		log.Info("tollgate: " + line)
	}
	// Coding agents' hooks: their sessions are threads of this host.
	// Its policy is reloaded as serve's own is (--policy-reload), and a
	// reload that loosens it is a notice too.
	if s.hookSvc, s.hookLP, err = hookService(ctx, store, s.hookPolicy, log, watch); err != nil {
		return withCode(2, err)
	}
	hcfg := host.Config{Store: store, Agent: tmpl, Logger: log, Kinds: []host.Kind{s.hookSvc.Kind()}}
	notifier, err := newNotifier(s.notifyCfg, store, log)
	if err != nil {
		return err
	}
	// On PostgreSQL every replica is one of a cluster, be it the only one:
	// runs, answers and deadlines go through River's jobs and leases, so
	// that more replicas can join at any time.
	coord, poll, err := serveCluster(ctx, store, s.lease, s.samePolicy, notifier, tmpl, log)
	if err != nil {
		return err
	}
	if coord != nil {
		w.later(func() { coord.Close() })
		hcfg.Coordinator, s.coord = coord, coord
	}
	if s.h, _, err = w.startHost(ctx, hcfg, 0); err != nil {
		return err
	}
	if err := s.hookSvc.Start(s.h); err != nil {
		s.h.Shutdown(context.WithoutCancel(ctx)) // before its store closes
		return err
	}
	notifications, stopNotify := startNotifications(ctx, notifier, s.h, coord, s.notices, log)
	w.later(stopNotify)
	modelLabel := serveModelLabel(s.af.model)
	cfg := s.cfg
	cfg.Host, cfg.Model, cfg.PollInterval = s.h, modelLabel, poll
	cfg.Collectors, cfg.Warnings = collectorsOf(coord), warningsOf(coord)
	cfg.Learning, cfg.Hooks, cfg.Notifications = policyOfThread(lp.current, s.hookLP.current), s.hookSvc, notifications
	if s.srv, err = reviewServer(cfg, modelLabel); err != nil {
		s.h.Shutdown(context.WithoutCancel(ctx))
		return err
	}
	s.hs = newHTTPServer(s.srv, log, nil)
	return nil
}

// newNotifier is the notifier of serve's notifications file; none (nil)
// without one.
func newNotifier(cfg *notify.Config, store checkpoint.Store, log *slog.Logger) (*notify.Notifier, error) {
	if cfg == nil {
		return nil, nil
	}
	return notify.New(notify.Options{Config: cfg, Store: store, Logger: log})
}

// serveModelLabel is the model as the page names it.
func serveModelLabel(model string) string {
	if model == "demo" || model == "" {
		return "demo (the offline demo model: each line of a message that starts with \"$ \" becomes a bash command)"
	}
	return model
}

// serveChecks checks serve's flags before anything is opened, in the
// user's terms: the tokens, the policy's reload, the streams' cap, the
// address (dev mode on a loopback address only), the model and the MCP
// servers. It sets dev for a loopback address without tokens, and
// maxStreams to the server's "no cap" for 0. An error is a flag's (exit
// status 2).
func serveChecks(log *slog.Logger, tokensFile string, af *agentFlags, maxStreams *int, addr string, dev *bool, mcpf *mcpFlags) ([]server.Token, []mcpgate.ServerConfig, error) {
	tokens, err := loadTokens(tokensFile)
	if err != nil {
		return nil, nil, err
	}
	if _, err := parsePolicyReload(af.reload); err != nil {
		return nil, nil, err
	}
	if *maxStreams < 0 {
		return nil, nil, fmt.Errorf("--max-streams-per-token %d: give a number of streams, or 0 for no limit", *maxStreams)
	}
	if *maxStreams == 0 {
		*maxStreams = -1 // the server's "no cap"
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, nil, fmt.Errorf("--addr %q: want host:port, such as 127.0.0.1:8080 or :8080", addr)
	}
	loopback := isLoopback(addr)
	if len(tokens) == 0 && !*dev {
		if !loopback {
			return nil, nil, fmt.Errorf("no tokens configured and %s is not a loopback address: give --tokens FILE or TOLLGATE_TOKENS (see 'tollgate token new'), or listen on 127.0.0.1 for dev mode", addr)
		}
		*dev = true
	}
	if *dev && !loopback {
		return nil, nil, fmt.Errorf("dev mode (no authentication) only listens on a loopback address, not %s", addr)
	}

	if _, _, err := providerFor(af.model); err != nil {
		return nil, nil, err
	}
	if problem := credentialProblem(af.model); problem != "" {
		log.Warn("tollgate: " + problem)
	}
	mcpConfigs, err := mcpf.configs()
	if err != nil {
		return nil, nil, err
	}
	return tokens, mcpConfigs, nil
}

// serveState loads the notifications' file, and refuses tollgate's state
// (the store, the policy, the tokens, the notifications' files) inside
// the bash tool's directory unless stateInDir; it tells af what is
// tollgate's state. An error is a flag's (exit status 2).
func serveState(log *slog.Logger, notifyConfig, storeURL, tokensFile, hookPolicy string, stateInDir bool, af *agentFlags) (*notify.Config, *noticeBoard, error) {
	var err error
	var notifyCfg *notify.Config
	var notifyFiles []string
	if notifyConfig != "" {
		if notifyCfg, err = notify.Load(notifyConfig, os.Getenv); err != nil {
			return nil, nil, err
		}
		if err := checkNotifyGroups(notifyCfg, af.policyFile); err != nil {
			return nil, nil, err
		}
		// The file names the webhooks and whose presses answer; its
		// secret files sign the answers: a command that could rewrite
		// them could answer its own calls.
		notifyFiles = append([]string{notifyConfig}, notifyCfg.SecretFiles()...)
	}
	state := statePaths(storeURL, append([]string{af.policyFile, tokensFile, hookPolicy}, notifyFiles...)...)
	if p := stateInside(af.dir, state); p != "" {
		if !stateInDir {
			return nil, nil, fmt.Errorf("%s is inside the bash tool's working directory (--dir %s): a command run there could rewrite it and approve its own calls; keep it elsewhere (the default store is in %s), or give --allow-state-in-workdir to take that risk", p, af.dir, filepath.Dir(strings.TrimPrefix(defaultStore(), "sqlite:")))
		}
		log.Warn("tollgate's state is inside the bash tool's working directory: unconfined and approved commands can rewrite it (--allow-state-in-workdir)", "path", p, "dir", af.dir)
	}
	af.masked = state
	notices := &noticeBoard{fixed: af.sandbox.notices()}
	af.loosened = notices.policyLoosened
	return notifyCfg, notices, nil
}

// serveCluster makes the cluster a replica on PostgreSQL is one of, be it
// the only one, and the poll interval of its event streams; none (nil, 0)
// on another store.
func serveCluster(ctx context.Context, store checkpoint.Store, lease time.Duration, samePolicy bool, notifier *notify.Notifier, tmpl agent.Config, log *slog.Logger) (*cluster.Cluster, time.Duration, error) {
	pg, ok := store.(*postgres.Store)
	if !ok {
		return nil, 0, nil
	}
	coord, err := cluster.New(ctx, cluster.Config{Store: pg, LeaseTTL: lease, Logger: log, Notifier: notifier,
		PolicyDigest: tmpl.PolicyDigest, RequireSamePolicy: samePolicy})
	if err != nil {
		return nil, 0, err
	}
	log.Info("tollgate: cluster mode", "replica", coord.ID(), "lease", lease.String(), "policy_digest", tmpl.PolicyDigest())
	// Events other replicas write reach this one's streams by the log's
	// poll (questions by notification, at once).
	return coord, 300 * time.Millisecond, nil
}

// serveUntilStopped serves until ctx ends or the listener fails, then
// stops in order, and says what was left.
func serveUntilStopped(ctx context.Context, ln net.Listener, hs *http.Server, srv *server.Server, h *host.Host, hookSvc *hooks.Service, servers *mcpgate.Servers, clustered bool, grace time.Duration, log *slog.Logger, stdout io.Writer) int {
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	select {
	case err := <-serveErr:
		log.Error("tollgate serve: the listener failed", "err", err)
	case <-ctx.Done():
		log.Info("tollgate: shutting down", "grace", grace.String())
	}
	// Hooks waiting for a person are answered first (tollgate's command
	// hook sends its call again to the next server; an agent's http hook
	// is denied), streams end (they never finish on their own), then
	// requests in flight, then the runs: each gets the grace period to
	// finish or park.
	hookSvc.Shutdown()
	srv.Close()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := hs.Shutdown(shutCtx); err != nil {
		log.Warn("tollgate: requests still open at shutdown were cut", "err", err)
	}
	stats, _ := h.Shutdown(shutCtx)
	if servers != nil {
		if err := servers.Close(); err != nil {
			log.Warn("tollgate: closing the MCP servers", "err", err)
		}
	}
	if clustered {
		log.Info("tollgate: stopped; other replicas go on with the runs cut off, and resume the others when answered",
			"parked_runs", stats.Parked, "runs_cut_off", stats.Active, "failed_runs", stats.Failed)
		fmt.Fprintf(stdout, "tollgate: stopped: %s parked waiting for answers, %s cut off mid-way (other replicas go on with them, or the next start)\n", plural(stats.Parked, "run"), plural(stats.Active, "run"))
		return 0
	}
	log.Info("tollgate: stopped; every unfinished run resumes at the next start",
		"parked_runs", stats.Parked, "runs_cut_off", stats.Active, "failed_runs", stats.Failed)
	fmt.Fprintf(stdout, "tollgate: stopped: %s parked waiting for answers, %s cut off mid-way (they resume at the next start)\n", plural(stats.Parked, "run"), plural(stats.Active, "run"))
	return 0
}

// warningsOf is what /readyz says is wrong with the cluster, when there is
// one: replicas that decide by different policies.
func warningsOf(c *cluster.Cluster) func() []string {
	if c == nil {
		return nil
	}
	return c.PolicyMismatch
}

// collectorsOf is the cluster's metrics, when there is one.
func collectorsOf(c *cluster.Cluster) []prometheus.Collector {
	if c == nil {
		return nil
	}
	return []prometheus.Collector{c.Collector()}
}

func loadTokens(file string) ([]server.Token, error) {
	var tokens []server.Token
	if file != "" {
		t, err := server.LoadTokens(file)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, t...)
	}
	if env := strings.TrimSpace(os.Getenv("TOLLGATE_TOKENS")); env != "" {
		t, err := server.ParseTokensEnv(env)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, t...)
	}
	return tokens, nil
}

// isLoopback reports whether addr (host:port) listens only on a loopback
// interface.
func isLoopback(addr string) bool {
	hostPart, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if hostPart == "localhost" {
		return true
	}
	ip := net.ParseIP(hostPart)
	return ip != nil && ip.IsLoopback()
}

// readDeadline bounds the time a client may take to send its request body,
// so that slow or stalled uploads do not hold connections forever. Event
// streams read nothing after their headers and are left alone.
func readDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/stream") {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}
