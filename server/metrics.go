package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate-ai/tollgate/agent"
	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/hitl"
	"github.com/tollgate-ai/tollgate/host"
	"github.com/tollgate-ai/tollgate/internal/qkind"
)

// metrics are the server's Prometheus metrics. Counters of answers, runs
// and tool calls come from the host's events, so they count what this
// process did (answers given through any of its callers, deadlines it
// fired); the gauges are read at each scrape.
type metrics struct {
	reg        *prometheus.Registry
	registered []prometheus.Collector

	answers       *prometheus.CounterVec
	answerSeconds prometheus.Histogram
	runs          *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	storeErrors   prometheus.Counter
	streams       prometheus.Gauge
}

// The label values every series starts with (at zero), so that dashboards
// and rates see them before the first event.
var (
	answerDecisions = []string{hitl.DecisionApprove, hitl.DecisionDeny, hitl.DecisionEdit, qkind.Yes, qkind.No, qkind.Answered, "timed_out"}
	runOutcomes     = []string{"completed", "failed", "aborted", "parked"}
	toolDecisions   = []string{"allowed", "error", "human_deny", "edit", "policy_deny", "timed_out", "aborted", "other"}
)

func newMetrics(reg *prometheus.Registry, extra []prometheus.Collector, s *Server) (*metrics, error) {
	own := reg == nil
	if own {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		reg: reg,
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_answers_total",
			Help: "Questions resolved by this process: by decision (approve, deny, edit; yes, no; answered; timed_out)."}, []string{"decision"}),
		answerSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tollgate_answer_seconds",
			Help:    "Time from a question's creation to its answer, in seconds.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 12 * 3600, 24 * 3600}}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_runs_total",
			Help: "Runs that ended or parked in this process, by outcome (completed, failed, aborted, parked)."}, []string{"outcome"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tool_calls_total",
			Help: "Tool calls with a result, by decision (allowed, error, human_deny, edit, policy_deny, timed_out, aborted, other)."}, []string{"decision"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_store_errors_total",
			Help: "Store failures seen by the server (requests, streams, readiness, scrapes)."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_streams_open",
			Help: "Event streams (server-sent events) open now."}),
	}
	for _, d := range answerDecisions {
		m.answers.WithLabelValues(d)
	}
	for _, o := range runOutcomes {
		m.runs.WithLabelValues(o)
	}
	for _, d := range toolDecisions {
		m.toolCalls.WithLabelValues(d)
	}
	cs := []prometheus.Collector{m.answers, m.answerSeconds, m.runs, m.toolCalls, m.storeErrors, m.streams,
		&gaugeCollector{s: s, m: m}}
	cs = append(cs, extra...)
	if own {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, errors.New("server: registering metrics (is another server on this registry?): " + err.Error())
		}
		m.registered = append(m.registered, c)
	}
	return m, nil
}

func (m *metrics) unregister() {
	for _, c := range m.registered {
		m.reg.Unregister(c)
	}
	m.registered = nil
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// observe counts one host event.
func (m *metrics) observe(e agent.Event) {
	switch e := e.(type) {
	case *host.ResolvedEvent:
		q := e.Question
		m.answers.WithLabelValues(answerDecision(q)).Inc()
		if q.Status == checkpoint.QuestionAnswered && !q.ResolvedAt.IsZero() {
			m.answerSeconds.Observe(q.ResolvedAt.Sub(q.CreatedAt).Seconds())
		}
	case *agent.RunFinishedEvent:
		switch {
		case e.Err == nil:
			m.runs.WithLabelValues("completed").Inc()
		case errors.Is(e.Err, agent.ErrAborted):
			// Counted by its AgentAbortedEvent.
		case errors.Is(e.Err, context.Canceled):
			// Cut off by a shutdown: resumed at the next start, not ended.
		case errors.Is(e.Err, checkpoint.ErrUnavailable):
			// The store out of reach: the host resumes it once it is back.
		default:
			m.runs.WithLabelValues("failed").Inc()
		}
	case *agent.RunParkedEvent:
		m.runs.WithLabelValues("parked").Inc()
	case *agent.AgentAbortedEvent:
		m.runs.WithLabelValues("aborted").Inc()
	case *agent.ToolCallFinishedEvent:
		m.toolCalls.WithLabelValues(toolDecision(&e.Result)).Inc()
	}
}

// answerDecision labels a resolution from a small fixed set, whatever the
// answer holds.
func answerDecision(q *checkpoint.Question) string {
	switch q.Status {
	case checkpoint.QuestionTimedOut:
		return "timed_out"
	case checkpoint.QuestionAborted:
		return "aborted"
	}
	a := qkind.Read(q.Kind, q.Answer)
	switch {
	case a.Readable:
		return a.Decision
	case q.Kind == hitl.KindConfirm:
		return qkind.No
	case qkind.Of(q.Kind).Approval:
		return hitl.DecisionDeny // what a run does with it (SPEC)
	}
	return qkind.Answered
}

// toolDecision labels a tool result by the approval trace it carries.
func toolDecision(r *agent.ToolResult) string {
	for _, key := range []string{"hitl", "interrupt"} {
		trace, ok := r.Details[key].(map[string]any)
		if !ok {
			continue
		}
		d, _ := trace["decision"].(string)
		switch d {
		case "human_deny", "edit", "policy_deny", "timed_out", "aborted":
			return d
		case "deny":
			return "human_deny"
		case "approve":
			continue
		}
		return "other"
	}
	if r.IsError {
		return "error"
	}
	return "allowed"
}

// gaugeCollector reads the gauges at each scrape: pending questions from
// the store (one count), runs from the host.
type gaugeCollector struct {
	s *Server
	m *metrics
}

var (
	descPending = prometheus.NewDesc("tollgate_questions_pending", "Questions waiting for an answer, in the whole store.", nil, nil)
	descActive  = prometheus.NewDesc("tollgate_runs_active", "Runs being driven by this process.", nil, nil)
	descQueued  = prometheus.NewDesc("tollgate_runs_queued", "Runs waiting for a resume slot in this process.", nil, nil)
	descParked  = prometheus.NewDesc("tollgate_runs_parked", "Runs parked by this process, waiting for answers.", nil, nil)
	descFailed  = prometheus.NewDesc("tollgate_runs_failed", "Runs that stopped with an error (resume or abort them).", nil, nil)
	descDropped = prometheus.NewDesc("tollgate_host_events_dropped_total", "Host events lost by subscribers that fell behind (the store's log has them all).", nil, nil)
)

func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descActive, descQueued, descParked, descFailed, descDropped} {
		ch <- d
	}
}

func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.host.Stats()
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(st.Active))
	ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(st.Parked))
	ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, float64(st.Failed))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(c.s.host.Dropped()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.s.store.CountQuestions(ctx, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending})
	if err != nil {
		c.m.storeErrors.Inc()
		c.s.log.Warn("tollgate: counting pending questions for /metrics", "err", err)
		ch <- prometheus.NewInvalidMetric(descPending, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n))
}
