package commands

import (
	"strconv"
	"strings"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Metric is one sample of the metrics endpoint (server/metrics.go), in
// the Prometheus data model: a name, its help, whether it only grows, and
// label pairs.
type Metric struct {
	Name    string
	Help    string
	Counter bool
	Labels  [][2]string
	Value   float64
}

// Metrics returns the server's figures for the metrics endpoint:
//   - every numeric field of every INFO section (commandstats,
//     replication, RedisAI's module sections and the per-model rows aside)
//     as enclaveai_<field>, a counter when the field is a total (total_*,
//     expired_keys, evicted_keys, rejected_connections, used_cpu_*);
//   - the keyspace, as INFO keyspace's db0 line: enclaveai_db_keys and
//     enclaveai_db_expires{db="0"};
//   - per command, as INFO commandstats: enclaveai_command_calls_total,
//     _usec_total, _rejected_total, _failed_total{cmd};
//   - per model, as AI.INFO: enclaveai_model_calls_total, _errors_total,
//     _run_usec_total, _samples_total{key}, only when no authentication is
//     configured: the endpoint asks for none, and key names are the
//     tenants' business.
func (s *App) Metrics() []Metric {
	var out []Metric
	seen := map[string]bool{}
	for _, sec := range s.infoSections(func(sec *InfoSection) bool {
		// Replication's figures are constants here; RedisAI's module sections
		// repeat others'.
		return sec.Name != "Commandstats" && sec.Name != "Replication" && !sec.Module
	}) {
		for _, f := range sec.fields {
			v, err := strconv.ParseFloat(f[1], 64)
			name := metricName(f[0])
			if err != nil || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, Metric{Name: "enclaveai_" + name, Help: "INFO " + strings.ToLower(sec.name) + " " + f[0],
				Counter: strings.HasPrefix(name, "total_") || name == "expired_keys" || name == "evicted_keys" || name == "rejected_connections" ||
					strings.HasPrefix(name, "used_cpu_") ||
					strings.HasPrefix(name, "model_calls") || strings.HasPrefix(name, "model_errors") ||
					strings.HasPrefix(name, "model_run_usec") || strings.HasPrefix(name, "model_samples"),
				Value: v})
		}
	}
	// INFO keyspace's one line is not a number: its counts go apart, as
	// redis_exporter names them (operator review: no key count at all).
	keys, expires := s.Keys.Len()
	db := [][2]string{{"db", "0"}}
	out = append(out,
		Metric{Name: "enclaveai_db_keys", Help: "Keys in the keyspace (INFO keyspace db0 keys, DBSIZE).", Labels: db, Value: float64(keys)},
		Metric{Name: "enclaveai_db_expires", Help: "Keys with a time to live (INFO keyspace db0 expires).", Labels: db, Value: float64(expires)})
	for _, spec := range table.Sorted() {
		calls, usec, rejected, failed := spec.stats.sum()
		if calls == 0 && rejected == 0 {
			continue
		}
		cmd := [][2]string{{"cmd", spec.Name}}
		out = append(out,
			Metric{Name: "enclaveai_command_calls_total", Help: "Commands run (INFO commandstats calls).", Counter: true, Labels: cmd, Value: float64(calls)},
			Metric{Name: "enclaveai_command_usec_total", Help: "Microseconds spent running commands (INFO commandstats usec).", Counter: true, Labels: cmd, Value: float64(usec)},
			Metric{Name: "enclaveai_command_rejected_total", Help: "Commands refused before running (INFO commandstats rejected_calls).", Counter: true, Labels: cmd, Value: float64(rejected)},
			Metric{Name: "enclaveai_command_failed_total", Help: "Commands that ran and failed (INFO commandstats failed_calls).", Counter: true, Labels: cmd, Value: float64(failed)})
	}
	if *s.Opts.Requirepass.Load() != "" || s.Opts.UsersEnabled() {
		return out
	}
	for _, it := range s.Keys.Items() {
		m, ok := it.Value.(*modelstore.Model)
		if !ok {
			continue
		}
		key := [][2]string{{"key", it.Key}}
		out = append(out,
			Metric{Name: "enclaveai_model_calls_total", Help: "Runs of a model (AI.INFO calls).", Counter: true, Labels: key, Value: float64(m.Stats.Calls.Load())},
			Metric{Name: "enclaveai_model_errors_total", Help: "Failed runs of a model (AI.INFO errors).", Counter: true, Labels: key, Value: float64(m.Stats.Errors.Load())},
			Metric{Name: "enclaveai_model_run_usec_total", Help: "Microseconds a model ran (AI.INFO duration).", Counter: true, Labels: key, Value: float64(m.Stats.Duration.Load())},
			Metric{Name: "enclaveai_model_samples_total", Help: "Batch rows a model ran (AI.INFO samples).", Counter: true, Labels: key, Value: float64(m.Stats.Samples.Load())})
	}
	return out
}

// metricName maps an INFO field to a Prometheus metric name.
func metricName(field string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, field)
}
