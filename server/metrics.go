package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/enclaveai/enclaveai/commands"
)

// The metrics endpoint: GET /metrics on metrics-bind:metrics-port, in the
// Prometheus text format, through the official client library
// (github.com/prometheus/client_golang: its registry, its Go and process
// collectors, and its HTTP handler, which negotiates the formats and
// compression scrapers ask for). The server's own figures come from
// commands.App.Metrics, read at each scrape: nothing is counted twice.

// appCollector turns App.Metrics into Prometheus samples. It is an
// unchecked collector (Describe sends nothing): which commands and models
// have series changes at run time.
type appCollector struct{ app *commands.App }

// Describe implements prometheus.Collector.
func (appCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c appCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.app.Metrics() {
		names := make([]string, len(m.Labels))
		values := make([]string, len(m.Labels))
		for i, l := range m.Labels {
			names[i], values[i] = l[0], l[1]
		}
		kind := prometheus.GaugeValue
		if m.Counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(m.Name, m.Help, names, nil), kind, m.Value, values...)
	}
}

// listenMetrics starts the metrics endpoint when metrics-port is set.
func (s *Server) listenMetrics() error {
	if s.opts.MetricsPort == 0 {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(appCollector{s.Cmds}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: metricsLog{s}, ErrorHandling: promhttp.ContinueOnError}))
	addr := net.JoinHostPort(s.opts.MetricsBind, strconv.FormatInt(s.opts.MetricsPort, 10))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics endpoint: %w", err)
	}
	s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10}
	s.log.Info("metrics endpoint", "addr", ln.Addr().String(), "path", "/metrics")
	go func() {
		if err := s.metrics.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	return nil
}

// metricsLog sends the handler's errors to the server's log.
type metricsLog struct{ s *Server }

// Println implements promhttp.Logger.
func (l metricsLog) Println(v ...any) { l.s.log.Warn("metrics", "err", fmt.Sprint(v...)) }
