#!/usr/bin/env bash
# bench/run.sh [section ...]: EnclaveAI's benchmarks, each against a baseline
# measured in the same run (docs/BENCHMARKS.md records the figures).
#
#   core    redis-benchmark: AI.TENSORSET / AI.TENSORGET of a 3136-byte FLOAT
#           tensor against Redis's SET / GET of the same 3136 bytes, rounds
#           alternating between the servers; also the server under
#           GOMAXPROCS=1 and under GOGC=100 (Go's default; the server's own
#           is 400) (BENCH_VARIANTS=0 skips those)
#   models  bench/latency: AI.MODELEXECUTE of mlp.onnx at batch 1 against
#           onnxruntime_go in-process and a loopback PING
#   go      the Go benchmarks of packages commands and server, and the
#           keyspace's SCAN and expiry at 10k and 1M keys
#
# With no section, all of them. `make bench` runs it after `make build models`.
# Every server it starts listens on 127.0.0.1 only and is stopped on exit,
# however the script ends; each measurement has a time limit.
#
# Settings (environment): BENCH_REQUESTS (500000 per redis-benchmark run),
# BENCH_ROUNDS (3), BENCH_CLIENTS (50), BENCH_PIPELINE (16), BENCH_VARIANTS
# (1), BENCH_LATENCY_N (2000), BENCH_PROFILE=file (also run the server once
# more under the core load with ENCLAVEAI_CPUPROFILE and print pprof -top).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
SERVER=$REPO/bin/enclaveai-server
MODEL=$REPO/redis_tests/models/mlp.onnx
REQUESTS=${BENCH_REQUESTS:-500000}
ROUNDS=${BENCH_ROUNDS:-3}
CLIENTS=${BENCH_CLIENTS:-50}
PIPELINE=${BENCH_PIPELINE:-16}
VARIANTS=${BENCH_VARIANTS:-1}
LATENCY_N=${BENCH_LATENCY_N:-2000}
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3
# One redis-benchmark run may take this long; at the slowest rate seen on a
# loaded 2-core machine (~40k ops/s) 500k requests take under 15 s.
RUN_LIMIT=120s

sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(core models go)

WORK=$(mktemp -d /tmp/enclaveai-bench.XXXXXX)
PIDS=()
SUMMARY=$WORK/summary

# cleanup stops every server this script started (SIGTERM, then SIGKILL
# after 10 s) and removes the scratch directory.
cleanup() {
	local pid i
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "== $*" | tee -a "$SUMMARY"; }

need_debs() {
	local missing="" p
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
	if [ -n "$missing" ]; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
	fi
}

free_port() {
	"$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_ready PORT PID: polls PING until the server answers (10 s at most).
wait_ready() {
	local i
	for ((i = 0; i < 500; i++)); do
		[ "$(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null)" = PONG ] && return 0
		kill -0 "$2" 2>/dev/null || { echo "server on port $1 exited before answering PING" >&2; return 1; }
		sleep 0.02
	done
	echo "server on port $1 did not answer PING within 10 s" >&2
	return 1
}

# start_server KIND [ENV=value ...]: starts redis or enclaveai on a free
# port with snapshots off; sets PORT and PID. The environment of the
# EnclaveAI server is the given one only for GOMAXPROCS and GOGC, so that a
# caller's settings do not leak into the default configuration.
start_server() {
	local kind=$1 dir
	shift
	PORT=$(free_port)
	dir=$WORK/$kind-$PORT
	mkdir -p "$dir"
	case $kind in
	redis)
		redis-server --bind 127.0.0.1 --port "$PORT" --dir "$dir" --save "" --appendonly no \
			--daemonize no --logfile "$dir/log" &
		;;
	enclaveai)
		env -u GOMAXPROCS -u GOGC "$@" "$SERVER" --bind 127.0.0.1 --port "$PORT" --dir "$dir" --save "" \
			>"$dir/log" 2>&1 &
		;;
	esac
	PID=$!
	PIDS+=("$PID")
	wait_ready "$PORT" "$PID"
}

# stop_server PID: SIGTERM (with snapshots off nothing is saved), then
# forget the PID so that cleanup never signals a number the system may
# have given to another process since.
stop_server() {
	local keep=() p
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# bench PORT COMMAND...: one redis-benchmark run; prints requests per second.
# -q prints one line per test, redrawn with carriage returns while it runs.
bench_rps() {
	local port=$1 rps
	shift
	rps=$(timeout "$RUN_LIMIT" redis-benchmark -h 127.0.0.1 -p "$port" -n "$REQUESTS" -c "$CLIENTS" -P "$PIPELINE" -q "$@" |
		tr '\r' '\n' | grep -a 'requests per second' | tail -1 |
		sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p')
	[ -n "$rps" ] || { echo "redis-benchmark gave no figure for $1" >&2; return 1; }
	echo "$rps"
}

# check PORT EXPECTED COMMAND...: redis-benchmark counts error replies as
# answers, so every measured command is also sent once and its reply checked.
check() {
	local port=$1 want=$2 got
	shift 2
	got=$(redis-cli -h 127.0.0.1 -p "$port" "$@" | tr -d '\n' | wc -c)
	[ "$got" = "$want" ] || { echo "unexpected reply to $1 on port $port: $got bytes, want $want" >&2; return 1; }
}

# round_ratios LABEL OP: the median over rounds of LABEL's figure divided by
# Redis's in the same round (the files hold one line per round, in order).
round_ratios() {
	paste "$WORK/rps.$1.$2" "$WORK/rps.redis.$2" | awk '{print $1 / $2}' | median
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# A 3136-byte argument: printable, because redis-benchmark takes its
# command from argv; as FLOAT bytes 'xxxx' is a finite number.
VALUE=$(head -c 3136 /dev/zero | tr '\0' x)
TSET=(AI.TENSORSET t FLOAT 784 BLOB "$VALUE")
TGET=(AI.TENSORGET t BLOB)

# record LABEL OP VALUE: keeps one measurement for the medians.
record() { echo "$3" >>"$WORK/rps.$1.$2"; printf '   %-16s %-4s %12.0f ops/s\n' "$1" "$2" "$3"; }

measure_enclaveai() {
	local label=$1
	shift
	start_server enclaveai "$@"
	bench_rps "$PORT" "${TSET[@]}" >"$WORK/v"
	record "$label" SET "$(cat "$WORK/v")"
	check "$PORT" 2 "${TSET[@]}"
	bench_rps "$PORT" "${TGET[@]}" >"$WORK/v"
	record "$label" GET "$(cat "$WORK/v")"
	check "$PORT" 3136 "${TGET[@]}"
	stop_server "$PID"
}

measure_redis() {
	start_server redis
	bench_rps "$PORT" SET t "$VALUE" >"$WORK/v"
	record redis SET "$(cat "$WORK/v")"
	check "$PORT" 2 SET t "$VALUE"
	bench_rps "$PORT" GET t >"$WORK/v"
	record redis GET "$(cat "$WORK/v")"
	check "$PORT" 3136 GET t
	stop_server "$PID"
}

section_core() {
	need_debs redis-server redis-tools
	local variants=(default) r v order
	if [ "$VARIANTS" = 1 ]; then
		variants=(default P1 GOGC100 P1-GOGC100)
	fi
	say "core: ops/s at -c $CLIENTS -P $PIPELINE, $REQUESTS requests a run, $ROUNDS rounds; $(redis-server --version | cut -d' ' -f1-3)"
	for ((r = 1; r <= ROUNDS; r++)); do
		echo "-- round $r/$ROUNDS (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
		# Odd rounds run Redis first, even rounds the same order reversed
		# (ABBA): a steady drift in the machine's speed then weighs on all
		# servers alike, and the default configuration always runs next
		# to Redis.
		order=(redis "${variants[@]}")
		if ((r % 2 == 0)); then
			local i rev=()
			for ((i = ${#order[@]} - 1; i >= 0; i--)); do rev+=("${order[i]}"); done
			order=("${rev[@]}")
		fi
		for v in "${order[@]}"; do
			case $v in
			redis) measure_redis ;;
			default) measure_enclaveai enclaveai ;;
			P1) measure_enclaveai enclaveai-P1 GOMAXPROCS=1 ;;
			GOGC100) measure_enclaveai enclaveai-GOGC100 GOGC=100 ;;
			P1-GOGC100) measure_enclaveai enclaveai-P1-GOGC100 GOMAXPROCS=1 GOGC=100 ;;
			esac
		done
	done
	local rs rg s g label
	rs=$(median <"$WORK/rps.redis.SET")
	rg=$(median <"$WORK/rps.redis.GET")
	# Two ratios: of the medians, and the median of each round's ratio to
	# that round's Redis figure. The second compares runs made close
	# together (the default configuration runs right next to Redis), so
	# load that comes and goes on a shared machine skews it less.
	say "core: medians of $ROUNDS rounds; x = EnclaveAI / Redis: of the medians (median of per-round ratios)"
	printf '%-22s %9s %9s %15s %15s\n' server 'SET ops/s' 'GET ops/s' 'SET x' 'GET x' | tee -a "$SUMMARY"
	printf '%-22s %9.0f %9.0f\n' redis "$rs" "$rg" | tee -a "$SUMMARY"
	for v in "${variants[@]}"; do
		label=enclaveai
		[ "$v" = default ] || label=enclaveai-$v
		s=$(median <"$WORK/rps.$label.SET")
		g=$(median <"$WORK/rps.$label.GET")
		printf '%-22s %9.0f %9.0f %7.2f (%5.2f) %7.2f (%5.2f)\n' "$label" "$s" "$g" \
			"$(awk "BEGIN {print $s / $rs}")" "$(round_ratios "$label" SET)" \
			"$(awk "BEGIN {print $g / $rg}")" "$(round_ratios "$label" GET)" | tee -a "$SUMMARY"
	done
	echo "every run, in round order (ops/s):" >>"$SUMMARY"
	for label in redis "${variants[@]/#/enclaveai-}"; do
		label=${label/enclaveai-default/enclaveai}
		printf '  %-20s SET %s; GET %s\n' "$label" "$(paste -sd' ' "$WORK/rps.$label.SET")" \
			"$(paste -sd' ' "$WORK/rps.$label.GET")" >>"$SUMMARY"
	done
	if [ -n "${BENCH_PROFILE:-}" ]; then
		echo "-- profile: one more TENSORSET and TENSORGET run under ENCLAVEAI_CPUPROFILE (not measured)"
		start_server enclaveai ENCLAVEAI_CPUPROFILE="$BENCH_PROFILE"
		bench_rps "$PORT" "${TSET[@]}" >/dev/null
		bench_rps "$PORT" "${TGET[@]}" >/dev/null
		stop_server "$PID"
		go tool pprof -top -nodecount 40 "$SERVER" "$BENCH_PROFILE" 2>/dev/null | head -50
	fi
}

section_models() {
	[ -f "$MODEL" ] || { echo "$MODEL is missing: run make models" >&2; return 1; }
	say "models: AI.MODELEXECUTE latency, $LATENCY_N calls of each kind"
	go build -o "$WORK/latency" ./bench/latency
	# The tool starts its own server on a free 127.0.0.1 port and stops it.
	env -u GOMAXPROCS -u GOGC timeout 300s "$WORK/latency" -server "$SERVER" -model "$MODEL" -n "$LATENCY_N" |
		tee "$WORK/latency.out"
	grep -v '^RESULT' "$WORK/latency.out" | grep -E '^(kind|ort|modelstore|MODELEXECUTE|PING)' >>"$SUMMARY"
}

section_go() {
	say "go: Go benchmarks (commands, server, modelstore, worker)"
	go test -run '^$' -bench . -benchmem -benchtime 1s ./commands ./server | grep -E '^(Benchmark|ok|FAIL)' | tee -a "$SUMMARY"
	# SCAN and active expiry at 10k and 1M keys: the cost per call must not
	# grow with the keyspace.
	go test -run '^$' -bench Keyspace -benchmem -benchtime 2000x ./modelstore | grep -E '^(Benchmark|ok|FAIL)' | tee -a "$SUMMARY"
	# The engine wall's cost per run: the same runs through a worker and in
	# process (linear.onnx, and the loop's mlp.onnx at 1, 8 and 32 rows).
	go test -run '^$' -bench '^BenchmarkRun$' -benchmem ./worker | grep -E '^(Benchmark|ok|FAIL)' | tee -a "$SUMMARY"
}

[ -x "$SERVER" ] || { echo "$SERVER is missing: run make build" >&2; exit 1; }

{
	echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')), $(free -g | awk '/^Mem:/ {print $2}') GiB"
	echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} | tee -a "$SUMMARY"
for s in "${sections[@]}"; do
	case $s in
	core | models | go) "section_$s" ;;
	*) echo "unknown section $s (core, models, go)" >&2; exit 2 ;;
	esac
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$SUMMARY"
echo
echo "======== summary"
cat "$SUMMARY"
