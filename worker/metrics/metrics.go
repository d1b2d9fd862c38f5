// Package metrics is what a nid worker tells Prometheus: every session's
// context, turns and rotations, each group's budget spent, how long turns
// and rotations take, and the Temporal SDK's own worker metrics, all on one
// registry that the worker serves at /metrics.
//
//	m, err := metrics.New(logger)
//	c, err := client.Dial(client.Options{MetricsHandler: m.SDK(), ...})
//	m.Watch(c)  // the sessions' and groups' gauges, read at each scrape
//	w := worker.New(c, queue, worker.Options{Interceptors: m.Interceptors()})
//	http.Handle("/metrics", m.Handler())
//
// Nothing here runs in a workflow's own code or changes what a workflow
// does. The gauges are read from Temporal when Prometheus scrapes: one
// visibility list (as nid ls) and one query per group. Turn and rotation
// counts and durations are observed by interceptors as activities and
// rotation workflows end on this worker, never while a history replays, so
// a restarted worker counts nothing twice; like every Prometheus counter
// they start at zero with the process.
package metrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/opentelemetry"
)

// Label names.
const (
	labelGroup   = "group"
	labelSession = "session"
	labelAgent   = "agent"
	labelStatus  = "status"
	labelKind    = "kind"
	labelMethod  = "method"
	labelReason  = "reason"
	labelOutcome = "outcome"
)

// Outcomes of a turn or a rotation.
const (
	OutcomeOK          = "ok"
	OutcomeFailed      = "failed"
	OutcomeContextFull = "context-full"
	OutcomeCancelled   = "cancelled"
)

// turnBuckets span a turn against a model that answers at once (tens of
// milliseconds) to one that works for half an hour.
var turnBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// rotationBuckets span a compaction of a small context to a handoff that
// waits out its timeouts.
var rotationBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// sdkBuckets are the buckets of the Temporal SDK's latency histograms, in
// seconds: from a fast poll to a long activity.
var sdkBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics is one worker's registry and what feeds it.
type Metrics struct {
	reg      *prometheus.Registry
	sdk      client.MetricsHandler
	errorLog errorLog

	turnSeconds     *prometheus.HistogramVec
	rotations       *prometheus.CounterVec
	rotationSeconds *prometheus.HistogramVec
}

var liveHeap = regexp.MustCompile(`^/gc/heap/live:bytes$`)

// New makes a registry with the process's and the Go runtime's metrics, a
// Temporal SDK metrics handler that reports into it, and nid's turn and
// rotation metrics. SDK errors (a metric it cannot record) go to logger.
func New(logger *slog.Logger) (*Metrics, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg:      reg,
		errorLog: errorLog{logger},
		turnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nid_turn_duration_seconds",
			Help:    "How long the turns this worker ran took, by agent kind, turn kind (work, handoff-request, fresh) and outcome (ok, failed, context-full, cancelled).",
			Buckets: turnBuckets,
		}, []string{labelAgent, labelKind, labelOutcome}),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nid_rotations_total",
			Help: "Rotations this worker saw end, by group, agent kind, method (compact, handoff), reason (context, maxTurns, manual, agent, vendor, ...) and outcome (ok, failed, cancelled). An auto rotation whose compaction failed counts a failed compact and then its handoff.",
		}, []string{labelGroup, labelAgent, labelMethod, labelReason, labelOutcome}),
		rotationSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nid_rotation_duration_seconds",
			Help:    "How long the rotations this worker ran took, from the rotation starting to its end, by agent kind, method and outcome. The vendor's own compactions happen inside a turn and are not here.",
			Buckets: rotationBuckets,
		}, []string{labelAgent, labelMethod, labelOutcome}),
	}
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo(),
		otelprom.WithAggregationSelector(func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationExplicitBucketHistogram{Boundaries: sdkBuckets}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}))
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	m.sdk = opentelemetry.NewMetricsHandler(opentelemetry.MetricsHandlerOptions{
		Meter:                provider.Meter("temporal-sdk-go"),
		UseMonotonicCounters: true,
		OnError:              func(err error) { logger.Warn("Temporal SDK metric not recorded", "error", err) },
	})
	for _, c := range []prometheus.Collector{
		// The live heap (what the last collection kept) tells a leak from
		// the garbage and the allocator's slack the resident set also holds.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: liveHeap})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.turnSeconds, m.rotations, m.rotationSeconds,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SDK is the handler to give the Temporal client (client.Options
// MetricsHandler): the SDK's worker, poller and request metrics.
func (m *Metrics) SDK() client.MetricsHandler { return m.sdk }

// Watch adds the gauges read from Temporal through c at every scrape:
// every session's context, turns, rotations and status, and every group's
// budget.
func (m *Metrics) Watch(c client.Client) error { return m.reg.Register(&fleet{c: c}) }

// Handler serves the registry in Prometheus's text format. A scrape whose
// reading from Temporal failed still serves everything else, and the
// failure goes to the log; who may read is the caller's decision.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: m.errorLog})
}

// errorLog takes promhttp's errors to the worker's log.
type errorLog struct{ logger *slog.Logger }

// Println logs what promhttp could not gather.
func (l errorLog) Println(v ...any) {
	l.logger.Warn("Metrics scrape incomplete", "error", fmt.Sprint(v...))
}
