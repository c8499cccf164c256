# EnclaveAI build. `make run` builds and starts the server, `make test` runs
# every test; both install what they need on a fresh Debian machine.

ORT_VERSION := 1.24.1
ORT_DIR     := $(CURDIR)/.cache/onnxruntime/$(ORT_VERSION)
ORT_LIB     := $(ORT_DIR)/libonnxruntime.so.1
PYTHON      := /usr/bin/python3
GO          ?= go
export ENCLAVEAI_ONNXRUNTIME_LIB := $(ORT_LIB)

.PHONY: enclave build run test lint test-go test-redis deps ort models crash-models crash-test fuzz-models bench bench-cluster bench-readers bench-core bench-snapshot bench-huge bench-mem bench-clients bench-aof bench-wall bench-loop bench-engines bench-plots fuzz test-nocgo race clean

build: bin/enclaveai-server bin/enclaveai-cli bin/enclaveai-server-nocgo

# The revision --version shows (GOFLAGS may turn off go build's VCS stamp).
REVISION := $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)

bin/enclaveai-server: $(ORT_LIB) FORCE
	$(GO) build -ldflags "-X main.revision=$(REVISION)" -o $@ ./cmd/enclaveai-server
	cp -f $(ORT_LIB) bin/libonnxruntime.so.1.tmp && mv -f bin/libonnxruntime.so.1.tmp bin/libonnxruntime.so.1

# The cgo-free static build: no ONNX Runtime, the pure-Go engine only (the
# code an enclave runs; `make enclave` builds the same with EGo).
bin/enclaveai-server-nocgo: FORCE
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.revision=$(REVISION)" -o $@ ./cmd/enclaveai-server

bin/enclaveai-cli: FORCE
	$(GO) build -o $@ ./cmd/enclaveai-cli

FORCE:

ort: $(ORT_LIB)

# ONNX Runtime's Linux x64 library ships inside the npm package onnxruntime-node.
$(ORT_LIB):
	@command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm)
	mkdir -p $(ORT_DIR)/pack
	cd $(ORT_DIR)/pack && npm pack --silent onnxruntime-node@$(ORT_VERSION) >/dev/null
	tar -xzf $(ORT_DIR)/pack/onnxruntime-node-$(ORT_VERSION).tgz -C $(ORT_DIR)/pack package/bin/napi-v6/linux/x64/libonnxruntime.so.1
	mv $(ORT_DIR)/pack/package/bin/napi-v6/linux/x64/libonnxruntime.so.1 $@.tmp && mv $@.tmp $@
	rm -rf $(ORT_DIR)/pack

# make run PORT=6380 BIND=0.0.0.0 DIR=/tmp/ai ARGS="--maxmemory 8gb"
PORT ?= 6379
BIND ?= 127.0.0.1
DIR  ?= ./data
run: build
	mkdir -p $(DIR)
	bin/enclaveai-server --port $(PORT) --bind $(BIND) --dir $(DIR) $(ARGS)

# Debian packages the black-box tests use, installed only when missing.
TEST_DEBS := redis-tools redis-server python3-redis python3-numpy python3-onnx python3-torch \
             python3-tqdm python3-venv python3-pip python3-setuptools python3-jwt python3-cryptography
deps:
	@missing=""; for p in $(TEST_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

models: deps
	$(PYTHON) redis_tests/models/gen_models.py redis_tests/models

# The regression models of every crash class the model hunt found
# (fuzzmodels/regressions.py; committed, rewritten identically).
crash-models: deps
	$(PYTHON) fuzzmodels/regressions.py modelstore/testdata/crash

test: deps build models crash-models lint test-go race test-redis test-nocgo

# Static checks, each failing the build on a finding: formatting, go.mod in
# step with the imports, go vet, and staticcheck at a pinned version.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted" >&2; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# The black-box Go tests run the binary just built (redis_tests builds its
# own from the working tree when ENCLAVEAI_SERVER is not set).
test-go: bin/enclaveai-server
	ENCLAVEAI_SERVER=$(CURDIR)/bin/enclaveai-server $(GO) test -count=1 ./...

test-redis: build models crash-models
	$(PYTHON) -m unittest discover -s redis_tests -p 'test_*.py' -v

# The engine-independent suites again, against the cgo-free static binary
# (tensors, keys, transactions, users, redis-cli, the append-only log and
# its kill -9 tests, snapshots, tokens, INFO/SLOWLOG/MONITOR, attestation
# and receipts, the CLI, cluster mode and slot migration, marble mode, the
# Python client, resumable uploads: about 80 s here); test_goengine.py, run by test-redis, compares
# its inference with ONNX Runtime's. Not rerun: the model suites (their
# error texts are ORT's) and test_uploads (its one-copy RSS bounds are
# ORT's: the pure-Go engine holds a second copy of the weights,
# docs/ENCLAVE.md).
NOCGO_SUITES := test_core.py test_users.py test_redis_cli.py test_aof.py test_jwt.py test_observe.py \
	test_trust.py test_tools.py test_cluster.py test_client.py test_persistence.py test_resumable.py \
	test_migrate.py test_marble.py
test-nocgo: bin/enclaveai-server-nocgo models
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./goengine ./config ./persistence
	for s in $(NOCGO_SUITES); do ENCLAVEAI_SERVER=$(CURDIR)/bin/enclaveai-server-nocgo $(PYTHON) -m unittest discover -s redis_tests -p $$s || exit 1; done

# The race detector over every Go package but the black-box suites (which
# run the server binary): unit tests and TestLockOrderUnderLoad, which
# drives every lock of docs/LOCKS.md at once and fails on a deadlock.
# Part of `make test`: 52 s here with a warm build cache, 112 s cold.
race: $(ORT_LIB) models
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /redis_tests)

# crash-test: the kill -9 harness of the append-only log, 50 rounds per
# fsync policy (redis_tests/crash.py; a 6-round sample runs in make test).
.PHONY: crash-test
crash-test: build models
	cd redis_tests && $(PYTHON) crash.py --rounds 50 --appendfsync everysec
	cd redis_tests && $(PYTHON) crash.py --rounds 50 --appendfsync always

# Speed against baselines measured in the same run (docs/BENCHMARKS.md).
# Each benchmark is its own target that adds itself to `bench`; bench-core
# is tensors vs Redis, MODELEXECUTE vs onnxruntime_go and the Go benchmarks
# (bench/run.sh; BENCH_* variables tune it).
bench: bench-core

bench-core: build models
	bench/run.sh

# SAVE and load of a sealed snapshot of a 1.3 GB model against raw writes and
# reads of the same bytes (bench/snapshot.py; BENCH_SNAPSHOT_SIZE, _RUNS, _DIR).
bench: bench-snapshot
bench-snapshot: build models
	$(PYTHON) bench/snapshot.py

# A 1.3 GB model uploaded in three chunks against Redis's RPUSH of the same
# chunks, and its session creation against onnxruntime_go's; rewrites the
# "Huge models" section of docs/BENCHMARKS.md (bench/huge.py;
# BENCH_HUGE_SIZE, BENCH_HUGE_RUNS).
bench: bench-huge
bench-huge: build models
	$(PYTHON) bench/huge.py --doc docs/BENCHMARKS.md

# What the append-only log costs: a 1.3 GB upload's time to OK and small
# TENSORSET throughput, log off against on; rewrites the "Append-only log"
# section of docs/BENCHMARKS.md.
bench: bench-aof
bench-aof: build models
	$(PYTHON) bench/aof.py --doc docs/BENCHMARKS.md

# Peak memory of one 3 x 500 MB model upload read by redcon's reader and by
# ours: why the front end reads RESP itself (server package doc).
bench: bench-readers
bench-readers:
	$(GO) run ./bench/readers

# The engine wall (docs/ENGINE_ISOLATION.md) for the 1.3 GB model, on and
# off in alternating runs: upload time, peak memory of server plus worker,
# and the time to replace a killed worker (bench/wall.py; BENCH_WALL_SIZE,
# BENCH_WALL_RUNS). Its per-run latency is in bench-core (bench/latency).
bench: bench-wall
# Issue 14's figure: the mlp loop on three cluster nodes against one, in
# the same run (bench/cluster; about 1.5 minutes).
bench: bench-cluster
bench-cluster: build models
	$(GO) run ./bench/cluster -doc docs/BENCHMARKS.md

bench-wall: build models
	flock /tmp/enclaveai-bench.lock $(PYTHON) bench/wall.py

bench: bench-mem
bench-mem: build deps
	$(PYTHON) bench/tensormem.py --doc docs/BENCHMARKS.md

# What an idle client costs after a burst of pipelined commands, against
# Redis (bench/clientmem.py); rewrites the "Client memory" section.
bench: bench-clients
bench-clients: build deps
	$(PYTHON) bench/clientmem.py --doc docs/BENCHMARKS.md

# The inference loop (AI.TENSORSET -> AI.MODELEXECUTE -> AI.TENSORGET) at 1, 8
# and 32 clients, plain and batched, against Redis's SET -> PING -> GET of the
# same sizes; MODELEXECUTE latency against in-process ORT; the transformer
# against in-process ORT; TENSORSET/TENSORGET against SET/GET. One run, about
# two minutes; rewrites the figures of the "Inference loop" section of
# docs/BENCHMARKS.md (bench/loop; BENCH_LOOP_ARGS adds flags, e.g. -rounds 5).
# The pure-Go engine against in-process ONNX Runtime: µs per run per model at
# batch 1 and 32, session creation and peak memory for a 600 MB model;
# rewrites the "Pure-Go engine" section of docs/BENCHMARKS.md (bench/engines).
BENCH_ENGINES_HUGE ?= /tmp/enclaveai-huge-600mb.onnx
bench: bench-engines
bench-engines: build models
	test -f $(BENCH_ENGINES_HUGE) || (cd redis_tests/models && $(PYTHON) huge_model.py $(BENCH_ENGINES_HUGE) --size 600000000)
	$(GO) build -o bin/bench-engines ./bench/engines
	flock /tmp/enclaveai-bench.lock bin/bench-engines -huge $(BENCH_ENGINES_HUGE) -doc docs/BENCHMARKS.md

bench: bench-loop
bench-loop: build models
	$(GO) build -o bin/bench-loop ./bench/loop
	timeout 900 bin/bench-loop -doc docs/BENCHMARKS.md $(BENCH_LOOP_ARGS)

# Last: docs/BENCHMARKS.md's "Results at a glance", plots (docs/img) of the
# tables the benchmarks above wrote into it (bench/plots.py, matplotlib).
bench: bench-plots
bench-plots:
	@dpkg -s python3-matplotlib >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib)
	$(PYTHON) bench/plots.py docs/BENCHMARKS.md

# Every fuzz target for FUZZTIME each: the RESP reader, the command parsers,
# the cluster topology parser,
# the model checker, the snapshot loader, the pure-Go engine (built without
# cgo, as in the enclave: models from bytes, and one-node models from
# operators, attributes and shapes).
FUZZTIME ?= 30s
fuzz: $(ORT_LIB)
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzDispatch$$' -fuzztime $(FUZZTIME) ./commands
	$(GO) test -run '^$$' -fuzz '^FuzzCheckModelBlob$$' -fuzztime $(FUZZTIME) ./modelstore
	$(GO) test -run '^$$' -fuzz '^FuzzSanitizeModel$$' -fuzztime $(FUZZTIME) ./modelstore
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) ./persistence
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecords$$' -fuzztime $(FUZZTIME) ./persistence
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) ./persistence
	$(GO) test -run '^$$' -fuzz '^FuzzParseNodes$$' -fuzztime $(FUZZTIME) ./cluster
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeState$$' -fuzztime $(FUZZTIME) ./cluster
	CGO_ENABLED=0 $(GO) test -run '^$$' -fuzz '^FuzzGoEngine$$' -fuzztime $(FUZZTIME) ./goengine
	CGO_ENABLED=0 $(GO) test -run '^$$' -fuzz '^FuzzGoEngineOps$$' -fuzztime $(FUZZTIME) ./goengine
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./jwtauth
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./receipt

# The generated crash hunt: models of every ONNX operator with degenerate
# attributes, shapes and values, sent to the server binary, which is
# restarted when it dies (fuzzmodels/hunt.py; docs/MODEL_VALIDATION.md).
# Findings go to fuzzmodels/out/findings-seed<SEED>.json.
HUNT_MINUTES ?= 20
HUNT_SEED ?= 1
fuzz-models: build deps
	$(PYTHON) fuzzmodels/hunt.py --minutes $(HUNT_MINUTES) --seed $(HUNT_SEED) --out fuzzmodels/out

# An SGX enclave image with EGo (v1.9.0, Go 1.26.1): the build without ONNX
# Runtime (tag noort: the pure-Go engine, no engine workers, as
# CGO_ENABLED=0 builds it, but with cgo on for EGo's attestation and sealing),
# signed with enclave.json (key private.pem, made by `ego sign` on first
# use). docs/ENCLAVE.md says what runs inside.
enclave:
	@command -v ego-go >/dev/null && command -v ego >/dev/null || \
		{ echo "make enclave needs the EGo toolchain (ego-go, ego): not installed on this machine"; exit 1; }
	ego-go build -tags noort -o bin/enclaveai-server-enclave ./cmd/enclaveai-server
	ego sign enclave.json

clean:
	rm -rf bin
