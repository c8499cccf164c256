# EnclaveAI build. `make run` builds and starts the server, `make test` runs
# every test; both install what they need on a fresh Debian machine.

ORT_VERSION := 1.24.1
ORT_DIR     := $(CURDIR)/.cache/onnxruntime/$(ORT_VERSION)
ORT_LIB     := $(ORT_DIR)/libonnxruntime.so.1
PYTHON      := /usr/bin/python3
GO          ?= go
# The C header of the OrtApi table comes from the onnxruntime_go module itself.
# `go mod download` first: on a fresh machine `go list -m` names no directory.
ORT_GO_DIR  := $(shell $(GO) mod download github.com/yalue/onnxruntime_go && $(GO) list -m -f '{{.Dir}}' github.com/yalue/onnxruntime_go)
export CGO_CFLAGS += -I$(ORT_GO_DIR)
export ENCLAVEAI_ONNXRUNTIME_LIB := $(ORT_LIB)
# The same directory for `go` run by hand (`go test ./modelstore`): cgo also
# looks in .cache/onnxruntime_go (modelstore/extinit_cgo.go), linked here.
ORT_GO_LINK := .cache/onnxruntime_go

.PHONY: enclave build run test test-go test-redis test-nocgo deps ort models bench bench-core bench-snapshot bench-huge bench-mem fuzz clean

build: bin/enclaveai-server bin/enclaveai-cli bin/enclaveai-server-nocgo

bin/enclaveai-server: $(ORT_LIB) $(ORT_GO_LINK) FORCE
	$(GO) build -o $@ ./cmd/enclaveai-server
	cp -f $(ORT_LIB) bin/libonnxruntime.so.1.tmp && mv -f bin/libonnxruntime.so.1.tmp bin/libonnxruntime.so.1

# The cgo-free static build: no ONNX Runtime, the pure-Go engine only (the
# code an enclave runs; `make enclave` builds the same with EGo).
bin/enclaveai-server-nocgo: FORCE
	CGO_ENABLED=0 $(GO) build -o $@ ./cmd/enclaveai-server

bin/enclaveai-cli: FORCE
	$(GO) build -o $@ ./cmd/enclaveai-cli

FORCE:

ort: $(ORT_LIB) $(ORT_GO_LINK)

$(ORT_GO_LINK): FORCE
	@test -n "$(ORT_GO_DIR)" || { echo "no module directory for github.com/yalue/onnxruntime_go" >&2; exit 1; }
	@mkdir -p $(dir $@) && ln -sfn $(ORT_GO_DIR) $@

# ONNX Runtime's Linux x64 library ships inside the npm package onnxruntime-node.
$(ORT_LIB):
	@command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm)
	mkdir -p $(ORT_DIR)/pack
	cd $(ORT_DIR)/pack && npm pack --silent onnxruntime-node@$(ORT_VERSION) >/dev/null
	tar -xzf $(ORT_DIR)/pack/onnxruntime-node-$(ORT_VERSION).tgz -C $(ORT_DIR)/pack package/bin/napi-v6/linux/x64/libonnxruntime.so.1
	mv $(ORT_DIR)/pack/package/bin/napi-v6/linux/x64/libonnxruntime.so.1 $@.tmp && mv $@.tmp $@
	rm -rf $(ORT_DIR)/pack

run: build
	mkdir -p data
	bin/enclaveai-server --dir ./data

# Debian packages the black-box tests use, installed only when missing.
TEST_DEBS := redis-tools redis-server python3-redis python3-numpy python3-onnx python3-torch
deps:
	@missing=""; for p in $(TEST_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

models: deps
	$(PYTHON) redis_tests/models/gen_models.py redis_tests/models

test: deps build models test-go test-redis test-nocgo

test-go: $(ORT_LIB) $(ORT_GO_LINK)
	$(GO) vet ./...
	$(GO) test -count=1 ./...

test-redis: build models
	$(PYTHON) -m unittest discover -s redis_tests -p 'test_*.py' -v

# The engine-independent suites again, against the cgo-free static binary
# (tensors, keys, transactions, users, redis-cli: about 15 s here);
# test_goengine.py, run by test-redis, compares its inference with ONNX
# Runtime's. The model suites are not rerun: their error texts are ORT's.
NOCGO_SUITES := test_core.py test_users.py test_redis_cli.py
test-nocgo: bin/enclaveai-server-nocgo models
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./goengine ./config ./persistence
	for s in $(NOCGO_SUITES); do ENCLAVEAI_SERVER=$(CURDIR)/bin/enclaveai-server-nocgo $(PYTHON) -m unittest discover -s redis_tests -p $$s || exit 1; done

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

bench: bench-mem
bench-mem: build deps
	$(PYTHON) bench/tensormem.py --doc docs/BENCHMARKS.md

# Every fuzz target for FUZZTIME each: the RESP reader, the command parsers,
# the model checker, the snapshot loader.
FUZZTIME ?= 30s
fuzz: $(ORT_LIB) $(ORT_GO_LINK)
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzDispatch$$' -fuzztime $(FUZZTIME) ./commands
	$(GO) test -run '^$$' -fuzz '^FuzzCheckModelBlob$$' -fuzztime $(FUZZTIME) ./modelstore
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) ./persistence
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecords$$' -fuzztime $(FUZZTIME) ./persistence

# An SGX enclave image with EGo: builds with ego-go and signs with enclave.json
# (key private.pem, made by `ego sign` on first use). See docs/ENCLAVE.md for
# what runs inside today: ONNX Runtime must first be linked statically.
enclave:
	@command -v ego-go >/dev/null && command -v ego >/dev/null || \
		{ echo "make enclave needs the EGo toolchain (ego-go, ego): not installed on this machine"; exit 1; }
	ego-go build -o bin/enclaveai-server ./cmd/enclaveai-server
	ego sign enclave.json

clean:
	rm -rf bin
