#!/usr/bin/python3
"""A generated crash hunt against the server binary (`make fuzz-models`).

    /usr/bin/python3 fuzzmodels/hunt.py --minutes 20 --out fuzzmodels/out
    /usr/bin/python3 fuzzmodels/hunt.py --seconds 40 --check   # make test's sample

For every operator of the ONNX schemas (onnx.defs, opsets 13-17 of ai.onnx
and opset 3 of ai.onnx.ml) it writes models of one node with degenerate
attributes (0, negative, huge, lists of the wrong length), degenerate shapes
(zero and huge dims, rank 0, ranks that disagree) and extreme or zero input
values, given either as initializers (ONNX Runtime folds them while the
session is created, at AI.MODELSTORE) or fed at AI.MODELEXECUTE. Operators
of sequences, optionals and maps get small graphs around their node
(fuzzmodels/seqgen.py). Each model
goes to a real server (bin/enclaveai-server on a free port): AI.MODELSTORE,
then AI.TENSORSET of its inputs and AI.MODELEXECUTE with a TIMEOUT.

A finding is a server that died (the signal read from its stderr: the Go
runtime's "unexpected signal" report or SIGABRT), an `engine worker died`
error (once workers isolate ONNX Runtime the server survives and says so), a
hang (no reply within --hang seconds), or a server whose RSS passes --rss.
The server is restarted after each death, so a crash is a finding, not the
end of the hunt. Findings are bucketed by operator, stage (store or run) and
signal; the first model of each bucket is shrunk (attributes and inputs
dropped while it still crashes the same way) and written to
<out>/findings.json with its spec and model bytes (base64). Operators that
ONNX Runtime does not implement on CPU ("Could not find an implementation")
are noted and skipped after that.

With --check (make test) the hunt fails if the server itself died, hung or
grew past --rss: every class found at store is refused by the sanitizer, and
what only shows at run (shapes and values the sanitizer cannot see) must
stay inside an engine worker.
"""

import argparse
import base64
import collections
import copy
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import redis
from onnx import TensorProto, helper

import seqgen

warnings.simplefilter("ignore")  # numpy's overflow warnings on purposely extreme values
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSETS = (13, 14, 15, 16, 17)
ML_OPSET = 3

# Element types a client can feed with AI.TENSORSET, by ONNX type.
FEEDABLE = {
    TensorProto.FLOAT: ("FLOAT", np.float32), TensorProto.DOUBLE: ("DOUBLE", np.float64),
    TensorProto.INT8: ("INT8", np.int8), TensorProto.INT16: ("INT16", np.int16),
    TensorProto.INT32: ("INT32", np.int32), TensorProto.INT64: ("INT64", np.int64),
    TensorProto.UINT8: ("UINT8", np.uint8), TensorProto.UINT16: ("UINT16", np.uint16),
    TensorProto.UINT32: ("UINT32", np.uint32), TensorProto.UINT64: ("UINT64", np.uint64),
    TensorProto.BOOL: ("BOOL", np.bool_),
}
TYPE_BY_STR = {
    "tensor(float)": TensorProto.FLOAT, "tensor(double)": TensorProto.DOUBLE,
    "tensor(int8)": TensorProto.INT8, "tensor(int16)": TensorProto.INT16,
    "tensor(int32)": TensorProto.INT32, "tensor(int64)": TensorProto.INT64,
    "tensor(uint8)": TensorProto.UINT8, "tensor(uint16)": TensorProto.UINT16,
    "tensor(uint32)": TensorProto.UINT32, "tensor(uint64)": TensorProto.UINT64,
    "tensor(bool)": TensorProto.BOOL, "tensor(float16)": TensorProto.FLOAT16,
    "tensor(string)": TensorProto.STRING,
}
# Preferred types first: most kernels exist for float and int64.
TYPE_PREF = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.DOUBLE,
             TensorProto.UINT8, TensorProto.INT8, TensorProto.BOOL, TensorProto.STRING]

INTS = [0, -1, 1, 2, 3, -2, 4, 2**31 - 1, -2**31, 2**62, -2**63, 2**63 - 1, 1000000]
FLOATS = [0.0, 1.0, -1.0, 0.5, float("nan"), float("inf"), -float("inf"), 1e30, -1e-30]
STRINGS = ["", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect", "edge",
           "linear", "nearest", "cubic", "bilinear", "zeros", "border", "half_pixel",
           "asymmetric", "align_corners", "tf_crop_and_resize", "round_prefer_floor", "floor",
           "ceil", "DCR", "CRD", "Relu", "Tanh", "Sigmoid", "forward", "reverse", "bidirectional",
           "LOGISTIC", "SOFTMAX", "NONE", "SUM", "AVERAGE", "MAX", "BRANCH_LEQ", "LEAF", "x",
           "ij,jk->ik", "i,i", "...,...", "ii->i", "abc", "->", "add", "mul", "none", "tanh",
           "sum", "mean", "avg", "max", "DEFAULT", "HIGHEST", "NaN", "-", "\x00"]
DIMS = [1, 2, 3, 0, 4, 1, 2, 5, 7, 1]


def schemas():
    """The newest version of each schema at each opset we accept, for the
    default and ai.onnx.ml domains, that takes only tensor inputs."""
    latest = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain not in ("", "ai.onnx.ml") or s.deprecated:
            continue
        for opset in (OPSETS if s.domain == "" else (ML_OPSET,)):
            if s.since_version <= opset:
                k = (s.domain, s.name, opset)
                if k not in latest or latest[k].since_version < s.since_version:
                    latest[k] = s
    out = []
    for (_, _, opset), s in sorted(latest.items()):
        if not seqgen.covers(s.name) and any(
                a.type == onnx.defs.OpSchema.AttrType.GRAPH and a.required for a in s.attributes.values()):
            continue  # bodies are generated only for the operators seqgen knows
        out.append((s, opset))
    return out


def pick_types(s, rnd):
    """A binding of each type constraint to one tensor type, or None."""
    binding = {}
    for c in s.type_constraints:
        allowed = [TYPE_BY_STR[t] for t in c.allowed_type_strs if t in TYPE_BY_STR]
        if not allowed:
            return None
        pref = [t for t in TYPE_PREF if t in allowed]
        binding[c.type_param_str] = rnd.choice(pref) if pref and rnd.random() < 0.8 else rnd.choice(allowed)
    return binding


def elem_type(type_str, binding):
    if type_str in binding:
        return binding[type_str]
    return TYPE_BY_STR.get(type_str)


def rand_shape(rnd, base):
    r = rnd.random()
    if r < 0.45:
        return list(base)
    if r < 0.55:
        return []  # rank 0
    if r < 0.7:
        return [rnd.choice(DIMS) for _ in range(rnd.randint(1, 5))]
    if r < 0.8:
        return list(base[:-1]) if base else [1]
    if r < 0.9:
        return [rnd.choice([1, 2, 3]) for _ in range(rnd.randint(1, 3))]
    return [0] + list(base)[1:]


def rand_values(rnd, et, shape):
    n = int(np.prod(shape)) if shape else 1
    if et == TensorProto.STRING:
        return [rnd.choice(["", "a", "xyz"]) for _ in range(n)]
    if et == TensorProto.BOOL:
        return [rnd.random() < 0.5 for _ in range(n)]
    if et in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16):
        mode = rnd.random()
        if mode < 0.3:
            return [rnd.choice(FLOATS) for _ in range(n)]
        if mode < 0.4:
            return [0.0] * n
        return [rnd.uniform(-3, 3) for _ in range(n)]
    info = np.iinfo(FEEDABLE[et][1]) if et in FEEDABLE else np.iinfo(np.int64)
    mode = rnd.random()
    if mode < 0.35:
        vals = [rnd.choice(INTS) for _ in range(n)]
    elif mode < 0.45:
        vals = [0] * n
    elif mode < 0.55:
        vals = [rnd.choice([info.min, info.max, -1]) for _ in range(n)]
    else:
        vals = [rnd.randint(-3, 5) for _ in range(n)]
    return [int(min(max(v, info.min), info.max)) for v in vals]


def rand_attr(rnd, name, a):
    T = onnx.defs.OpSchema.AttrType
    t = a.type
    if t == T.INT:
        return rnd.choice(INTS) if rnd.random() < 0.6 else rnd.randint(-1, 3)
    if t == T.INTS:
        n = rnd.choice([0, 1, 2, 2, 3, 4, 5])
        if rnd.random() < 0.5:
            return [rnd.choice([1, 1, 2, 0, -1]) for _ in range(n)]
        return [rnd.choice(INTS) for _ in range(n)]
    if t == T.FLOAT:
        return rnd.choice(FLOATS)
    if t == T.FLOATS:
        return [rnd.choice(FLOATS) for _ in range(rnd.randint(0, 4))]
    if t == T.STRING:
        return rnd.choice(STRINGS)
    if t == T.STRINGS:
        return [rnd.choice(STRINGS) for _ in range(rnd.randint(0, 3))]
    if t == T.TENSOR:
        et = rnd.choice([TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32])
        shape = rnd.choice([[], [1], [0], [2]])
        return {"tensor": [et, shape, rand_values(rnd, et, shape)]}
    return None  # GRAPH(S), SPARSE_TENSOR, TYPE_PROTO(S): not generated


def gen_spec(rnd, s, opset):
    """A random spec of a one-node model of schema s, or None."""
    if seqgen.covers(s.name):
        return seqgen.gen(rnd, sys.modules[__name__], s, opset)
    binding = pick_types(s, rnd)
    if binding is None:
        return None
    base = [rnd.choice([1, 2, 3]) for _ in range(rnd.choice([1, 2, 3, 4, 4]))]
    inputs = []
    formal = list(s.inputs)
    for i, fi in enumerate(formal):
        opt = fi.option == onnx.defs.OpSchema.FormalParameterOption.Optional
        var = fi.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        if opt and rnd.random() < 0.35:
            inputs.append(None)
            continue
        for _ in range(rnd.randint(1, 3) if var else 1):
            et = elem_type(fi.typeStr, binding)
            if et is None:
                return None
            shape = rand_shape(rnd, base)
            const = et not in FEEDABLE or rnd.random() < 0.45
            if et == TensorProto.STRING:
                const = True
            if et in (TensorProto.INT64, TensorProto.INT32) and rnd.random() < 0.3:
                shape = [rnd.randint(0, 4)]  # shape-like inputs (Reshape, Expand, Tile, ...)
            vals = rand_values(rnd, et, shape)
            if const and et == TensorProto.INT64 and rnd.random() < 0.25:
                vals = [rnd.choice([10**12, 2**40, -1, 0, 2**62]) for _ in vals]
            # How a fed input is declared: its shape, symbolic dims (ONNX
            # Runtime's shape inference cannot check them at store), or
            # no shape at all.
            decl = rnd.choice(["fixed", "fixed", "symbolic", "none"])
            inputs.append({"type": et, "shape": shape, "const": const, "values": vals, "decl": decl})
    while inputs and inputs[-1] is None:
        inputs.pop()
    attrs = {}
    for name, a in s.attributes.items():
        if a.required or rnd.random() < 0.55:
            v = rand_attr(rnd, name, a)
            if v is None:
                if a.required:
                    return None
                continue
            attrs[name] = v
    # Outputs are declared with their element type (from the same type
    # binding) and no shape: the server asks ONNX Runtime only for tensor
    # outputs it knows the type of, so untyped outputs would never run.
    out_types = [elem_type(fo.typeStr, binding) for fo in s.outputs] or [None]
    return {"op": s.name, "domain": s.domain, "opset": opset, "inputs": inputs, "attrs": attrs,
            "nout": len(out_types), "out_types": out_types}


def tensor_proto(name, et, shape, vals):
    if et == TensorProto.STRING:
        vals = [v.encode() for v in vals]
    if et == TensorProto.FLOAT16:
        arr = np.array(vals, dtype=np.float16).reshape(shape)
        return onnx.numpy_helper.from_array(arr, name)
    return helper.make_tensor(name, et, shape, vals)


def build(spec):
    """The model bytes of a spec and the runtime inputs [(name, type, shape, values)]."""
    node_inputs, graph_inputs, inits, feeds, nodes = [], [], [], [], []

    def add_tensor(name, inp, dims=None):
        if inp["const"]:
            inits.append(tensor_proto(name, inp["type"], inp["shape"], inp["values"]))
        else:
            decl = inp.get("decl", "fixed")
            shape = inp["shape"]
            if decl == "symbolic":
                shape = ["%s_%d" % (dims or name, k) for k in range(len(shape))]
            elif decl == "none":
                shape = None
            graph_inputs.append(helper.make_tensor_value_info(name, inp["type"], shape))
            feeds.append((name, inp["type"], inp["shape"], inp["values"]))
        return name

    for i, inp in enumerate(spec["inputs"]):
        if inp is None:
            node_inputs.append("")
            continue
        made = seqgen.build_input(sys.modules[__name__], i, inp, add_tensor, nodes, graph_inputs)
        node_inputs.append(made or add_tensor("in%d" % i, inp, "d%d" % i))
    outs = ["out%d" % i for i in range(spec["nout"])]
    attrs = {}
    for k, v in spec["attrs"].items():
        tp = seqgen.attr_value(sys.modules[__name__], k, v)
        if tp is not None:
            v = tp
        elif isinstance(v, dict):
            et, shape, vals = v["tensor"]
            v = tensor_proto(k, et, shape, vals)
        attrs[k] = v
    post = spec.get("post")
    main_outs = ["mid0"] if post else outs
    nodes.append(helper.make_node(spec["op"], node_inputs, main_outs, name="n0", domain=spec["domain"], **attrs))
    if post:
        nodes += seqgen.post_nodes(spec, "mid0", outs[0])[0]
    out_types = spec.get("out_types") or [None] * len(outs)
    if seqgen.SEQ_OPS.get(spec["op"]) == "store":
        outputs = [seqgen.store_only_output(spec, outs[0])]
    else:
        outputs = [helper.make_tensor_value_info(o, t, None) if t else onnx.ValueInfoProto(name=o)
                   for o, t in zip(outs, out_types)]
    graph = helper.make_graph(nodes, "g", graph_inputs, outputs, inits)
    opsets = [helper.make_opsetid("", spec["opset"]), helper.make_opsetid("ai.onnx.ml", ML_OPSET)]
    m = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    return m.SerializeToString(), feeds


SIGNAL_RE = re.compile(r"\b(SIGSEGV|SIGFPE|SIGABRT|SIGBUS|SIGILL|SIGKILL|SIGTRAP)\b")


class Server:
    """The server under test, restarted when it dies."""

    def __init__(self, binary, rss_limit, as_limit):
        self.binary, self.rss_limit, self.as_limit = binary, rss_limit, as_limit
        self.proc = None
        self.restarts = 0
        self.rate_limited = 0  # waits for the engine workers' restart limit
        self.worker_restart_us = []  # INFO engine's time of each replacement seen

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="hunt-")
        self.errpath = os.path.join(self.dir, "stderr")
        port = free_port()

        def limits():
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (self.as_limit, self.as_limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        self.proc = subprocess.Popen([self.binary, "--port", str(port), "--dir", self.dir, "--save", "",
                                      "--maxmemory", "2gb"],
                                     stdout=subprocess.DEVNULL, stderr=open(self.errpath, "wb"),
                                     preexec_fn=limits)
        self.r = redis.Redis(port=port, socket_timeout=30)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.r.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("server did not start: " + open(self.errpath).read()[-2000:])
                time.sleep(0.02)

    def signal_of_death(self):
        """Waits for the dead server and names how it died."""
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None  # alive
        err = open(self.errpath, errors="replace").read()
        m = SIGNAL_RE.search(err)
        if m:
            return m.group(1)
        rc = self.proc.returncode
        if rc < 0:
            return signal.Signals(-rc).name
        if "out of memory" in err or "cannot allocate memory" in err:
            return "go-oom"
        return "exit%d" % rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.restart()

    def restart(self):
        if self.proc:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            subprocess.run(["rm", "-rf", self.dir])
        self.restarts += 1
        self.start()

    def rss(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["rm", "-rf", self.dir])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def try_model(srv, spec, hang):
    """try_model_once, waiting out the engine workers' restart rate limit
    (a slot restarts at most 5 times in 10 s: then stores and runs fail
    until it has room again)."""
    for _ in range(15):
        out = try_model_once(srv, spec, hang)
        if out[0] == "refused" and "engine worker restarting too often" in out[2]:
            srv.rate_limited += 1
            time.sleep(1)
            continue
        return out
    return out


def try_model_once(srv, spec, hang):
    """Runs one model. Returns (outcome, stage, detail): outcome is "ok",
    "refused" (a clean error), "unimplemented", or "finding" (detail names
    the signal, "hang", "memory" or "worker")."""
    try:
        blob, feeds = build(spec)
    except Exception:
        return "skip", "build", ""
    stage = "store"
    try:
        srv.r.connection_pool.connection_kwargs["socket_timeout"] = hang
        srv.r.connection_pool.disconnect()
        try:
            srv.r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", blob)
        except redis.ResponseError as e:
            msg = str(e)
            if "engine worker died" in msg:
                return "finding", stage, "worker:" + worker_signal(msg)
            if "Could not find an implementation" in msg:
                return "unimplemented", stage, msg
            return "refused", stage, msg
        stage = "run"
        names = []
        for name, et, shape, vals in feeds:
            tname, npt = FEEDABLE[et]
            arr = np.array(vals, dtype=npt).reshape(shape)
            srv.r.execute_command("AI.TENSORSET", name, tname, *shape, "BLOB", arr.tobytes())
            names.append(name)
        if not names:
            return "ok", stage, ""  # the binding cannot run a model without inputs
        outs = ["out%d" % i for i in range(spec["nout"])]
        try:
            srv.r.execute_command("AI.MODELEXECUTE", "m", "INPUTS", len(names), *names,
                                  "OUTPUTS", len(outs), *outs, "TIMEOUT", int(hang * 1000 / 2))
        except redis.ResponseError as e:
            msg = str(e)
            if "engine worker died" in msg:
                return "finding", stage, "worker:" + worker_signal(msg)
            return "refused", stage, msg
        if srv.rss() > srv.rss_limit:
            srv.kill()
            return "finding", stage, "memory"
        return "ok", stage, ""
    except (redis.ConnectionError, redis.TimeoutError, ConnectionError) as e:
        sig = srv.signal_of_death()
        if sig is None:
            # alive: a hang (or a slow allocation past the deadline)
            rss = srv.rss()
            srv.kill()
            return "finding", stage, "memory" if rss > srv.rss_limit else "hang"
        srv.restart()
        return "finding", stage, sig


def note_worker_restart(srv, before):
    """After a worker death: waits (at most 2 s) for the replacement that
    INFO engine counts after `before` restarts, and keeps how long it took
    to start and recreate its sessions (engine_worker_last_restart_us). A
    worker that had no sessions is not replaced until the next store needs
    it: then there is nothing to wait for."""
    for _ in range(40):
        try:
            info = srv.r.info("engine")
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return
        if info.get("engine_worker_restarts", 0) > before:
            srv.worker_restart_us.append(info.get("engine_worker_last_restart_us", 0))
            return
        if info.get("engine_sessions", 0) == 0:
            return
        time.sleep(0.05)


def restart_figures(us):
    """Median, 90th percentile and maximum of worker restart times, in ms."""
    if not us:
        return {}
    xs = sorted(us)
    at = lambda q: round(xs[min(len(xs) - 1, int(q * len(xs)))] / 1000, 1)
    return {"count": len(xs), "p50": at(0.5), "p90": at(0.9), "max": round(xs[-1] / 1000, 1)}


def worker_restarts(srv):
    try:
        return srv.r.info("engine").get("engine_worker_restarts", 0)
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
        return 0


def worker_signal(msg):
    m = SIGNAL_RE.search(msg)
    return m.group(1) if m else "died"


def shrink(srv, spec, bucket, hang, budget):
    """Drops attributes, optional inputs and values while the model still
    gives the same finding; at most budget tries."""
    tries = 0

    def same(cand):
        nonlocal tries
        tries += 1
        out, stage, detail = try_model(srv, cand, hang)
        return out == "finding" and (cand["op"], stage, detail) == bucket

    for k in list(spec["attrs"]):
        if tries >= budget:
            break
        cand = copy.deepcopy(spec)
        del cand["attrs"][k]
        if same(cand):
            spec = cand
    for i in range(len(spec["inputs"]) - 1, -1, -1):
        if tries >= budget:
            break
        if spec["inputs"][i] is None:
            continue
        cand = copy.deepcopy(spec)
        if i == len(cand["inputs"]) - 1:
            cand["inputs"].pop()
        else:
            cand["inputs"][i] = None
        if same(cand):
            spec = cand
    return spec


def replay(args):
    """Reruns recorded findings against the binary: prints each with its
    outcome now, and returns 1 when any still crashes."""
    srv = Server(args.binary, int(args.rss * 2**30), int(args.as_limit * 2**30))
    srv.start()
    still = 0
    try:
        for path in args.replay:
            for b in json.load(open(path))["findings"]:
                out, stage, detail = try_model(srv, b["spec"], args.hang)
                if out == "finding":
                    still += 1
                print("%-28s %-5s %-10s -> %s %s %s" % (b["op"], b["stage"], b["signal"], out, stage, detail[:100]))
    finally:
        srv.stop()
    print("replay: %d still crash" % still)
    return 1 if still else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--models", type=int, default=0, help="stop after this many models (0: no limit)")
    ap.add_argument("--out", default=os.path.join(REPO, "fuzzmodels", "out"))
    ap.add_argument("--binary", default=os.environ.get("ENCLAVEAI_SERVER") or os.path.join(REPO, "bin", "enclaveai-server"))
    ap.add_argument("--hang", type=float, default=20.0, help="seconds without a reply that make a hang")
    ap.add_argument("--rss", type=float, default=2.0, help="GB of server RSS that make a memory finding")
    ap.add_argument("--as-limit", type=float, default=8.0, help="GB of address space for the server")
    ap.add_argument("--shrink", type=int, default=12, help="tries to shrink each new finding")
    ap.add_argument("--ops", default="", help="comma-separated operators to hunt (default: all)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the server died, hung or grew (make test); worker deaths are contained")
    ap.add_argument("--replay", nargs="*", default=[],
                    help="findings-*.json files: rerun each finding's model and report which still crash")
    args = ap.parse_args()
    if args.replay:
        sys.exit(replay(args))
    seconds = args.seconds + args.minutes * 60 or 60
    rnd = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)

    all_schemas = schemas()
    if args.ops:
        wanted = set(args.ops.split(","))
        all_schemas = [x for x in all_schemas if x[0].name in wanted]
    srv = Server(args.binary, int(args.rss * 2**30), int(args.as_limit * 2**30))
    srv.start()
    stats = collections.Counter()
    buckets = {}
    unimplemented = set()
    ops_tried, ops_ran, ops_loaded = set(), set(), set()
    missing = collections.Counter()
    t0 = time.monotonic()
    deadline = t0 + seconds
    last_dump = t0
    log = open(os.path.join(args.out, "hunt.log"), "a")
    def write_summary():
        elapsed = time.monotonic() - t0
        implemented = sorted(set(x[0].name for x in all_schemas) - set(n for _, n in unimplemented))
        summary = {
            "seconds": round(elapsed, 1), "seed": args.seed, "models": stats["models"],
            "outcomes": {k: v for k, v in stats.items() if k != "models"},
            "operators_in_schemas": len(set(x[0].name for x in all_schemas)),
            "operators_implemented": len(implemented), "operators_tried": len(ops_tried),
            "operators_ran_ok": len(ops_ran),
            "unimplemented": sorted(n for _, n in unimplemented),
            "operators_not_tried": sorted(set(x[0].name for x in all_schemas) - ops_tried),
            "operators_store_only": sorted(n for n, k in seqgen.SEQ_OPS.items() if k == "store"),
            "operators_never_ran_clean": sorted(ops_tried - ops_ran),
            "server_restarts": srv.restarts,
            "rate_limit_waits": srv.rate_limited,
            "worker_deaths": dict(collections.Counter(
                "%s %s" % (b["stage"], b["signal"][len("worker:"):]) for b in buckets.values()
                for _ in range(b["count"]) if b["signal"].startswith("worker:"))),
            "server_deaths": dict(collections.Counter(
                "%s %s" % (b["stage"], b["signal"]) for b in buckets.values()
                for _ in range(b["count"]) if not b["signal"].startswith("worker:"))),
            "worker_restart_ms": restart_figures(srv.worker_restart_us),
            "findings": sorted(buckets.values(), key=lambda b: (b["op"], b["stage"], b["signal"])),
        }
        path = os.path.join(args.out, "findings-seed%d.json" % args.seed)
        with open(path, "w") as f:
            json.dump(summary, f, indent=1, default=str)
        return summary, path, elapsed

    try:
        while time.monotonic() < deadline:
            for s, opset in rnd.sample(all_schemas, len(all_schemas)):
                if time.monotonic() >= deadline or (args.models and stats["models"] >= args.models):
                    deadline = 0
                    break
                if time.monotonic() - last_dump > 60:
                    write_summary()
                    last_dump = time.monotonic()
                if (s.domain, s.name) in unimplemented:
                    continue  # ORT has no CPU kernel for it, at any type tried
                spec = gen_spec(rnd, s, opset)
                if spec is None:
                    stats["ungenerated"] += 1
                    continue
                restarts_before = worker_restarts(srv)
                out, stage, detail = try_model(srv, spec, args.hang)
                if out == "finding" and detail.startswith("worker:"):
                    note_worker_restart(srv, restarts_before)
                stats["models"] += 1
                stats[out] += 1
                ops_tried.add(s.name)
                if out == "unimplemented":
                    # A kernel may exist for other types: give up on the
                    # operator only after many misses and no other outcome.
                    missing[s.name] += 1
                    if missing[s.name] >= 30 and s.name not in ops_loaded:
                        unimplemented.add((s.domain, s.name))
                    continue
                ops_loaded.add(s.name)
                if out == "ok" and stage == "run":
                    ops_ran.add(s.name)
                if out != "finding":
                    continue
                key = (s.name, stage, detail)
                log.write("%.1f %s %s %s\n" % (time.monotonic() - t0, *key))
                log.flush()
                if key not in buckets:
                    small = shrink(srv, spec, key, args.hang, args.shrink) if args.shrink else spec
                    blob, _ = build(small)
                    buckets[key] = {"op": s.name, "stage": stage, "signal": detail, "count": 0,
                                    "spec": small, "model": base64.b64encode(blob).decode()}
                    print("finding: %s %s %s  attrs=%s" % (s.name, stage, detail, small["attrs"]), flush=True)
                buckets[key]["count"] += 1
    finally:
        srv.stop()
    summary, path, elapsed = write_summary()
    print("hunt: %d models in %.0fs, %d operators tried (%d ran clean), %d findings in %d buckets, %d restarts -> %s" % (
        stats["models"], elapsed, len(ops_tried), len(ops_ran), stats["finding"], len(buckets), srv.restarts, path))
    for b in summary["findings"]:
        print("  %-28s %-5s %-12s x%d" % (b["op"], b["stage"], b["signal"], b["count"]))
    print("worker deaths (stage signal: count): %s" % summary["worker_deaths"])
    print("server deaths (stage signal: count): %s" % summary["server_deaths"])
    # A crash while the session is created comes from what the model itself
    # declares, which the sanitizer reads: each is a rule to write (a
    # bucket that crashes.json already holds may hide a new cause).
    for b in summary["findings"]:
        if b["stage"] == "store":
            print("at store, for the sanitizer (docs/MODEL_VALIDATION.md, Adding a rule): %s %s x%d" % (
                b["op"], b["signal"], b["count"]))
    print("worker restart, kill to sessions recreated: %s; rate-limit waits %d" % (
        summary["worker_restart_ms"], srv.rate_limited))
    if args.check and any(not b["signal"].startswith("worker:") for b in buckets.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
