#!/usr/bin/python3
"""Generate the ONNX models (and reference results) the tests use.

    /usr/bin/python3 redis_tests/models/gen_models.py redis_tests/models
    /usr/bin/python3 redis_tests/models/gen_models.py --testdata modelstore/testdata

The first form writes the models of the black-box tests (git-ignored); the
second writes the small set the Go tests of package modelstore load (committed,
each file well under 50 KB). Output is deterministic: weights come from fixed
seeds or closed formulas, so rerunning the script rewrites identical files.

Models use opset 13 and IR version 8 (ONNX Runtime 1.24 loads them; RedisAI's
ORT 1.11 needed IR <= 8). Only onnx.helper and numpy are needed; cnn.onnx is
exported with PyTorch when it is installed and skipped (with a note) when not.

Redis-test models (OUTDIR):
  linear.onnx           x FLOAT [N,4] -> y = x @ W + b, FLOAT [N,3]
                        (W = 0.1*arange(12).reshape(4,3), b = [1,2,3]: the model
                        behind REDISAI.md section 10, so x=[1,2,3,4] -> [7,9,11])
  mlp.onnx              x FLOAT [N,784] -> 512 -> 512 -> 10 (Relu), output y
  add_int.onnx          a, b INT32 [N] -> c = a + b, INT32 [N]
  string_identity.onnx  s STRING [N] -> out STRING [N]
  slow.onnx             x FLOAT [1,1] -> y FLOAT [1,1]; a Loop of 1800 512x512
                        MatMuls: 3-5 s on two idle cores, more when busy
  unknown_op.onnx       uses an operator no runtime has
  external_data.onnx    linear with W stored as external data
  no_nodes.onnx         a graph without nodes (its output is never produced)
  bad_size.onnx         linear with a W whose raw_data is 40 bytes, not 48
  deep.onnx             100k nested length-delimited fields (protobuf bomb)
  html.onnx             an HTML error page
  truncated.onnx        the first half of linear.onnx
  cnn.onnx              (with PyTorch) x FLOAT [N,1,28,28] -> y FLOAT [N,10]
  crash_roialign_run.onnx  x FLOAT [1,1,4,4], rois FLOAT [1,4], bi INT64 [1]
                        -> RoiAlign: a batch index past x's batch, given at
                        run time, makes ONNX Runtime read out of bounds (SIGSEGV)
  crash_maxunpool_run.onnx  x FLOAT [1,1,2,2], i INT64 [1,1,2,2] -> MaxUnpool:
                        an index past the output, given at run time, trips
                        a libstdc++ assertion (SIGABRT)
  crash_roialign_store.onnx  RoiAlign's inputs as initializers (+ x): constant
                        folding crashes while the session is created (SIGSEGV)
  bomb.onnx             n INT64 [1] -> y = ConstantOfShape(n) FLOAT [n]: asks
                        for 4n bytes (10 GB with n = 2.5e9)
  rank.onnx             s INT64 [R] -> y = ConstantOfShape(s) FLOAT: a tensor
                        of rank R (past the 255 dimensions a tensor may have
                        with R = 300)
  hang_store.onnx       linear with the producer name the engine workers'
                        test hook (ENCLAVEAI_ENGINE_TEST_HOOKS=1) hangs on
  transformer.onnx      x FLOAT [N,64,256] -> y FLOAT [N,64,256]: 4 BERT-like
                        layers (4-head self-attention, 1024-wide Relu FFN,
                        residuals, mean/variance norms); about 0.4 GFLOP a
                        run, a heavy model for bench/loop
  opset18.onnx          x FLOAT [N,4,6,5] -> y FLOAT [N,328] at opset 18: Pad with
                        its input axes, ReduceMean/Max/Min with their axes an
                        input, Split with num_outputs (numpy's reference)
  <name>_ref.npz        reference inputs/outputs for linear, mlp (and cnn),
                        arrays named after the model's inputs and outputs
  reference.json        the same, as {model: {"inputs": {name: {"dtype",
                        "shape", "data"}}, "outputs": {...}}}
"""

import argparse
import io
import json
import os
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8

# Iterations of slow.onnx's loop. Each is one 512x512x512 MatMul (0.27
# GFLOP): about 2.8 ms of CPU with ONNX Runtime 1.24 on the 2-core build
# machine, so a run takes ~3-4 s there with ORT's default two threads, ~5 s
# on one, and longer on a busy machine. It is terminated within one
# iteration (milliseconds) when its deadline passes.
SLOW_ITERATIONS = 1800
SLOW_SIZE = 512

DEEP_LEVELS = 100_000


def make_model(graph, ir_version=IR_VERSION, opset=OPSET):
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="enclaveai-gen_models",
    )
    model.ir_version = ir_version
    return model


def save(model, outdir, name, check=True):
    if check:
        onnx.checker.check_model(model)
    write_bytes(outdir, name, model.SerializeToString())


def write_bytes(outdir, name, data):
    path = os.path.join(outdir, name)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


# --- reference results -------------------------------------------------------


def ref_entry(arrays_in, arrays_out):
    def enc(a):
        return {
            "dtype": {np.dtype("float32"): "FLOAT", np.dtype("int32"): "INT32"}[a.dtype],
            "shape": list(a.shape),
            # float32 -> Python float is exact, and JSON keeps 17 digits.
            "data": [float(v) if a.dtype.kind == "f" else int(v) for v in a.ravel()],
        }

    return {
        "inputs": {k: enc(v) for k, v in arrays_in.items()},
        "outputs": {k: enc(v) for k, v in arrays_out.items()},
    }


def npz_bytes(arrays):
    """What np.savez writes, but with fixed zip timestamps, so that the
    file is byte-for-byte reproducible. np.load reads it as usual."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for key, a in arrays.items():
            npy = io.BytesIO()
            np.lib.format.write_array(npy, np.ascontiguousarray(a), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), npy.getvalue())
    return buf.getvalue()


def save_refs(outdir, refs):
    for name, (ins, outs) in refs.items():
        write_bytes(outdir, name + "_ref.npz", npz_bytes({**ins, **outs}))
    doc = {name: ref_entry(ins, outs) for name, (ins, outs) in refs.items()}
    write_bytes(outdir, "reference.json", (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


# --- the models --------------------------------------------------------------


def linear_weights():
    w = (0.1 * np.arange(12, dtype=np.float64)).reshape(4, 3).astype(np.float32)
    b = np.array([1, 2, 3], dtype=np.float32)
    return w, b


def linear_model(w_tensor=None):
    w, b = linear_weights()
    if w_tensor is None:
        w_tensor = numpy_helper.from_array(w, "W")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
            helper.make_node("Add", ["xw", "b"], ["y"], name="add"),
        ],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        initializer=[w_tensor, numpy_helper.from_array(b, "b")],
    )
    return make_model(graph)


def linear_reference():
    w, b = linear_weights()
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [1, 1, 1, 1]], dtype=np.float32)
    y = (x @ w + b).astype(np.float32)
    return {"x": x}, {"y": y}


def mlp_weights():
    rng = np.random.default_rng(20240601)
    sizes = [784, 512, 512, 10]
    params = []
    for i in range(3):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        w = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal(fan_out) * 0.01).astype(np.float32)
        params.append((w, b))
    return params


def mlp_model():
    params = mlp_weights()
    nodes, inits = [], []
    cur = "x"
    for i, (w, b) in enumerate(params):
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("MatMul", [cur, f"W{i}"], [f"mm{i}"]))
        if i == 2:
            nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], ["y"]))
        else:
            nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"pre{i}"]))
            nodes.append(helper.make_node("Relu", [f"pre{i}"], [f"h{i}"]))
            cur = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 784])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        initializer=inits,
    )
    return make_model(graph)


def mlp_reference():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 784)).astype(np.float32)
    h = x
    for i, (w, b) in enumerate(mlp_weights()):
        h = (h @ w + b).astype(np.float32)
        if i < 2:
            h = np.maximum(h, 0)
    return {"x": x}, {"y": h.astype(np.float32)}


def add_int_model():
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"])],
        "add_int",
        [
            helper.make_tensor_value_info("a", TensorProto.INT32, ["N"]),
            helper.make_tensor_value_info("b", TensorProto.INT32, ["N"]),
        ],
        [helper.make_tensor_value_info("c", TensorProto.INT32, ["N"])],
    )
    return make_model(graph)


def string_identity_model():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["out"])],
        "string_identity",
        [helper.make_tensor_value_info("s", TensorProto.STRING, ["N"])],
        [helper.make_tensor_value_info("out", TensorProto.STRING, ["N"])],
    )
    return make_model(graph)


def slow_model(iterations=SLOW_ITERATIONS, size=SLOW_SIZE):
    """A Loop whose body multiplies a size x size state by a constant matrix.

    W is built at run time (ConstantOfShape), so the file stays tiny. The
    state is squashed with Tanh so values stay finite; y = sum of the state.
    """
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["s_in", "W"], ["prod"]),
            helper.make_node("Tanh", ["prod"], ["s_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "slow_body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [size, size]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [size, size]),
        ],
    )
    nodes = [
        helper.make_node(
            "ConstantOfShape",
            ["wshape"],
            ["W"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0 / size]),
        ),
        helper.make_node("Expand", ["x", "wshape"], ["s0"]),
        helper.make_node("Loop", ["trips", "cond", "s0"], ["s_final"], body=body),
        helper.make_node("ReduceSum", ["s_final"], ["y"], keepdims=1),
    ]
    graph = helper.make_graph(
        nodes,
        "slow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        initializer=[
            numpy_helper.from_array(np.array([size, size], dtype=np.int64), "wshape"),
            numpy_helper.from_array(np.array(iterations, dtype=np.int64), "trips"),
            numpy_helper.from_array(np.array(True), "cond"),
        ],
    )
    return make_model(graph)


def slow_compile_model(size=1024, matmuls=60):
    """Tiny on disk, slow to compile: ONNX Runtime folds the chain of
    MatMuls of constants (ConstantOfShape) at session creation, about
    1.6 s on the 2-core build machine."""
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c0"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1e-3]))]
    for i in range(matmuls):
        nodes.append(helper.make_node("MatMul", ["c%d" % i, "c0"], ["c%d" % (i + 1)]))
    nodes.append(helper.make_node("Add", ["x", "c%d" % matmuls], ["y"]))
    graph = helper.make_graph(
        nodes, "slow_compile",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])],
        initializer=[numpy_helper.from_array(np.array([size, size], dtype=np.int64), "s")],
    )
    return make_model(graph)


def unknown_op_model():
    graph = helper.make_graph(
        [helper.make_node("NoSuchOperator", ["x"], ["y"])],
        "unknown_op",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    return make_model(graph)


def external_data_model():
    w, _ = linear_weights()
    t = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4, 3])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(w.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return linear_model(t)


def no_nodes_model():
    graph = helper.make_graph(
        [],
        "no_nodes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )
    return make_model(graph)


def bad_size_model():
    w, _ = linear_weights()
    t = numpy_helper.from_array(w, "W")
    t.raw_data = t.raw_data[:40]  # dims say 4x3 floats = 48 bytes
    return linear_model(t)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def deep_bytes(levels=DEEP_LEVELS):
    """ModelProto.graph -> GraphProto.node -> NodeProto.attribute ->
    AttributeProto.g -> GraphProto.node -> ... nested `levels` deep.
    Every level is a valid length-delimited field."""
    tags = [
        (1 << 3) | 2,  # GraphProto.node
        (5 << 3) | 2,  # NodeProto.attribute
        (6 << 3) | 2,  # AttributeProto.g
    ]
    # size[i]: payload size of the message at depth i + 2 (the graph is at
    # depth 2); the innermost message is empty. Written outside in.
    size = [0] * levels
    for i in range(levels - 2, -1, -1):
        size[i] = 1 + len(varint(size[i + 1])) + size[i + 1]
    out = bytearray(bytes([(1 << 3) | 0]) + varint(IR_VERSION))  # ir_version
    out += bytes([(7 << 3) | 2]) + varint(size[0])  # ModelProto.graph
    for i in range(1, levels):
        out += bytes([tags[(i - 1) % 3]]) + varint(size[i])
    return bytes(out)


HTML = b"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>404 Not Found</title></head>
<body>
<h1>Not Found</h1>
<p>The requested URL /models/linear.onnx was not found on this server.</p>
<hr><address>nginx</address>
</body>
</html>
"""


def cnn_model_and_reference():
    """A small CNN exported with PyTorch, or None when torch is missing."""
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    torch.manual_seed(0)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(16 * 7 * 7, 10)

        def forward(self, x):
            x = self.pool(torch.relu(self.conv1(x)))
            x = self.pool(torch.relu(self.conv2(x)))
            return self.fc(torch.flatten(x, 1))

    net = CNN().eval()
    x = np.random.default_rng(11).standard_normal((2, 1, 28, 28)).astype(np.float32)
    buf = io.BytesIO()
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy().astype(np.float32)
        torch.onnx.export(
            net,
            torch.from_numpy(x),
            buf,
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
            opset_version=OPSET,
        )
    model = onnx.load_from_string(buf.getvalue())
    model.producer_name = "enclaveai-gen_models (pytorch %s)" % torch.__version__
    return model, ({"x": x}, {"y": y})


# Hostile models: each would take down a server that runs ONNX Runtime in
# its own process (docs/ENGINE_ISOLATION.md).


# The sanitizer (modelstore/sanitize.go) cannot refuse the two run-time
# crashes: the bad index is a value of an input. If it learns to refuse the
# folded one, the engine wall's store-stage test needs another model.
ROIALIGN_BAD_BATCH = 100_000_000
MAXUNPOOL_BAD_INDEX = 100_000_000_000


def crash_roialign_model(folded):
    attrs = dict(output_height=2, output_width=2)
    if not folded:
        graph = helper.make_graph(
            [helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], **attrs)],
            "crash_roialign_run",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4]),
             helper.make_tensor_value_info("rois", TensorProto.FLOAT, [1, 4]),
             helper.make_tensor_value_info("bi", TensorProto.INT64, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
        )
        return make_model(graph, opset=16)
    inits = [numpy_helper.from_array(np.ones((1, 1, 4, 4), np.float32), "x0"),
             numpy_helper.from_array(np.array([[0, 0, 3, 3]], np.float32), "rois"),
             numpy_helper.from_array(np.array([ROIALIGN_BAD_BATCH], np.int64), "bi")]
    graph = helper.make_graph(
        [helper.make_node("RoiAlign", ["x0", "rois", "bi"], ["r"], **attrs), helper.make_node("Add", ["x", "r"], ["y"])],
        "crash_roialign_store",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
        initializer=inits,
    )
    return make_model(graph, opset=16)


def crash_maxunpool_model():
    graph = helper.make_graph(
        [helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        "crash_maxunpool_run",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])],
    )
    return make_model(graph, opset=16)


def bomb_model():
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["n"], ["y"],
                          value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))],
        "bomb",
        [helper.make_tensor_value_info("n", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M"])],
    )
    return make_model(graph)


def rank_model():
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["y"],
                          value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))],
        "rank",
        [helper.make_tensor_value_info("s", TensorProto.INT64, ["R"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["A", "B"])],
    )
    return make_model(graph)


def pad_model(mode, opset=OPSET, pads=None):
    """One Pad node "pad" in mode of FLOAT x: fed pads of any shape x, or,
    with pads, constant pads (an initializer) of x declared [1, 3]. ONNX
    Runtime 1.24.1 returns memory it never wrote for reflect pads that
    reach what is left of their axis and wrap pads past it, which the
    server refuses (modelstore/padguard.go; test_crash_models.TestPadLeak)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["A", "B"] if pads is None else [1, 3])]
    inits = []
    if pads is None:
        inputs.append(helper.make_tensor_value_info("pads", TensorProto.INT64, [4]))
    else:
        inits.append(numpy_helper.from_array(np.array(pads, np.int64), "pads"))
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode=mode)],
        "pad_" + mode, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["C", "D"])],
        initializer=inits,
    )
    return make_model(graph, ir_version=9 if opset >= 19 else IR_VERSION, opset=opset)


def relu_model():
    """Relu of a FLOAT vector: runs a tensor through the engine worker."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
    )
    return make_model(graph)


# The marker package worker's test hook looks for (worker/child.go).
HANG_MARKER = "enclaveai-test-hang-at-compile"


def hang_store_model():
    m = linear_model()
    m.producer_name = HANG_MARKER
    return m


TF_SEQ, TF_HIDDEN, TF_HEADS, TF_FFN, TF_LAYERS = 64, 256, 4, 1024, 4


def transformer_model(opset=OPSET):
    """A 4-layer BERT-like encoder in plain opset-13 nodes (no PyTorch):
    enough arithmetic per run (about 0.4 GFLOP) to need several ms. At
    opset 17 its norms are LayerNormalization nodes, as PyTorch exports
    them, with scales and biases of their own (the same weights else)."""
    rng = np.random.default_rng(7)
    ln_rng = np.random.default_rng(8)
    S, H, NH, F = TF_SEQ, TF_HIDDEN, TF_HEADS, TF_FFN
    HD = H // NH
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(name, shape):
        return const(name, (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    const("split_heads", np.array([0, S, NH, HD], np.int64))
    const("merge_heads", np.array([0, S, H], np.int64))
    const("scale", np.array(1 / np.sqrt(HD), np.float32))
    const("eps", np.array(1e-5, np.float32))

    def norm(x, p):
        if opset >= 17:
            g = const(p + "_g", (1 + 0.1 * ln_rng.standard_normal(H)).astype(np.float32))
            b = const(p + "_b", (0.1 * ln_rng.standard_normal(H)).astype(np.float32))
            return node("LayerNormalization", [x, g, b], p + "_n", axis=-1, epsilon=1e-5)
        mean = node("ReduceMean", [x], p + "_mean", axes=[-1])
        d = node("Sub", [x, mean], p + "_d")
        var = node("ReduceMean", [node("Mul", [d, d], p + "_sq")], p + "_var", axes=[-1])
        return node("Div", [d, node("Sqrt", [node("Add", [var, "eps"], p + "_ve")], p + "_std")], p + "_n")

    x = "x"
    for l in range(TF_LAYERS):
        p = "l%d" % l
        heads = {}
        for h, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            proj = node("MatMul", [x, weight(p + "_w" + h, (H, H))], p + "_" + h)
            r = node("Reshape", [proj, "split_heads"], p + "_" + h + "r")
            heads[h] = node("Transpose", [r], p + "_" + h + "t", perm=perm)
        scores = node("Mul", [node("MatMul", [heads["q"], heads["k"]], p + "_qk"), "scale"], p + "_s")
        att = node("MatMul", [node("Softmax", [scores], p + "_p", axis=-1), heads["v"]], p + "_a")
        merged = node("Reshape", [node("Transpose", [att], p + "_at", perm=[0, 2, 1, 3]), "merge_heads"], p + "_m")
        o = node("MatMul", [merged, weight(p + "_wo", (H, H))], p + "_o")
        x = norm(node("Add", [x, o], p + "_r1"), p + "_n1")
        f = node("Add", [node("MatMul", [x, weight(p + "_w1", (H, F))], p + "_f1"), const(p + "_b1", np.zeros(F, np.float32))], p + "_f1b")
        f = node("MatMul", [node("Relu", [f], p + "_relu"), weight(p + "_w2", (F, H))], p + "_f2")
        x = norm(node("Add", [x, f], p + "_r2"), p + "_n2")
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        nodes, "transformer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", S, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", S, H])],
        inits)
    return make_model(graph, opset=opset)


def torch_model_and_reference(opset):
    """What PyTorch exports at opset 17 (its default from 2.0): Linear
    layers, LayerNorm over the last one and the last two dimensions (the
    LayerNormalization operator), a flattening reshape (Shape, Gather,
    Concat, Reshape with allowzero) and Softmax; with torch's outputs. At
    opset 11 the same net's norms are ReduceMean, Pow, Sqrt and the like,
    and its Unsqueeze takes its axes as an attribute."""
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    torch.manual_seed(3)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.ln = nn.Linear(32, 64), nn.LayerNorm(64)
            self.b, self.ln2 = nn.Linear(64, 16), nn.LayerNorm([8, 16])
            with torch.no_grad():  # not the identity the defaults are
                for ln in (self.ln, self.ln2):
                    ln.weight.add_(0.1 * torch.randn_like(ln.weight))
                    ln.bias.add_(0.1 * torch.randn_like(ln.bias))

        def forward(self, x):
            h = self.ln2(self.b(torch.relu(self.ln(self.a(x)))))
            return torch.softmax(h.reshape(h.shape[0], -1), dim=-1)

    net = Net().eval()
    x = np.random.default_rng(12).standard_normal((3, 8, 32)).astype(np.float32)
    buf = io.BytesIO()
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy().astype(np.float32)
        torch.onnx.export(net, torch.from_numpy(x), buf, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=opset)
    model = onnx.load_from_string(buf.getvalue())
    model.producer_name = "enclaveai-gen_models (pytorch %s)" % torch.__version__
    return model, ({"x": x}, {"y": y})


def vision_model_and_reference(opset):
    """A small classifier of the layers vision nets are made of, as PyTorch
    exports them at opset: padding of each mode (ReflectionPad2d,
    ReplicationPad2d, ZeroPad2d: Pad), AvgPool2d counting its padding (a
    Pad before an AveragePool) and not, with ceil_mode, Hardswish (the
    HardSwish operator from opset 14, x times a HardSigmoid before it),
    Hardsigmoid, ELU, Softplus, and LogSoftmax over the classes; with
    torch's outputs."""
    try:
        import torch
        from torch import nn
        from torch.nn import functional as F
    except ImportError:
        return None
    torch.manual_seed(14)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.pad_r, self.pad_e, self.pad_z = nn.ReflectionPad2d(1), nn.ReplicationPad2d((1, 2, 0, 1)), nn.ZeroPad2d(1)
            self.pool1 = nn.AvgPool2d(3, stride=2, padding=1)
            self.pool2 = nn.AvgPool2d(2, stride=2, ceil_mode=True, count_include_pad=False)
            self.fc = nn.Linear(8 * 5 * 6, 10)

        def forward(self, x):  # x: [N, 3, 15, 15]
            h = F.hardswish(self.conv(self.pad_r(x)))  # [N, 8, 15, 15]
            h = F.elu(self.pool1(self.pad_e(h)))  # [N, 8, 8, 9]
            h = self.pool2(self.pad_z(h))  # [N, 8, 5, 6]
            h = F.hardsigmoid(h) + F.softplus(h)
            return torch.log_softmax(self.fc(torch.flatten(h, 1)), dim=-1)

    net = Net().eval()
    x = np.random.default_rng(15).standard_normal((3, 3, 15, 15)).astype(np.float32)
    buf = io.BytesIO()
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy().astype(np.float32)
        torch.onnx.export(net, torch.from_numpy(x), buf, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=opset)
    model = onnx.load_from_string(buf.getvalue())
    model.producer_name = "enclaveai-gen_models (pytorch %s)" % torch.__version__
    return model, ({"x": x}, {"y": y})


def decoder_model_and_reference(opset):
    """A small decoder of the layers upsampling nets are made of, as
    PyTorch exports them at opset: ConvTranspose2d (stride, padding and
    output_padding; groups and dilation) and ConvTranspose1d, InstanceNorm2d
    with its affine parameters and without, InstanceNorm1d, and
    torch.cumsum along the channels and along the last axis; with torch's
    outputs."""
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    torch.manual_seed(16)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
            self.norm = nn.InstanceNorm2d(6, affine=True)
            self.up2 = nn.ConvTranspose2d(6, 4, (2, 3), stride=(1, 2), groups=2, dilation=(2, 1))
            self.norm2 = nn.InstanceNorm2d(4)
            self.up1d = nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1)
            self.norm1d = nn.InstanceNorm1d(2, eps=1e-3)
            with torch.no_grad():  # not the identity the defaults are
                self.norm.weight.add_(0.1 * torch.randn_like(self.norm.weight))
                self.norm.bias.add_(0.1 * torch.randn_like(self.norm.bias))

        def forward(self, x):  # x: [N, 4, 5, 5]
            h = torch.relu(self.norm(self.up(x)))  # [N, 6, 10, 10]
            h = self.norm2(self.up2(h))  # [N, 4, 12, 19]
            a = torch.cumsum(h, dim=1) + torch.cumsum(h, dim=-1)
            b = self.norm1d(self.up1d(h.mean(dim=2)))  # [N, 2, 37]
            return torch.cat([a.flatten(1), torch.cumsum(b, dim=2).flatten(1)], dim=1)

    net = Net().eval()
    x = np.random.default_rng(17).standard_normal((3, 4, 5, 5)).astype(np.float32)
    buf = io.BytesIO()
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy().astype(np.float32)
        torch.onnx.export(net, torch.from_numpy(x), buf, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=opset)
    model = onnx.load_from_string(buf.getvalue())
    model.producer_name = "enclaveai-gen_models (pytorch %s)" % torch.__version__
    return model, ({"x": x}, {"y": y})


def opset18_model_and_reference():
    """x FLOAT [N, 4, 6, 5] -> y FLOAT [N, 328] at opset 18, written with
    onnx.helper (this onnx knows opsets to 17, and PyTorch 1.13 exports to
    17; PyTorch 2's dynamo exporter writes 18), with the operators whose
    version 18 changed: a reflect Pad of two axes named by its input axes;
    ReduceMean, ReduceMax and ReduceMin with their axes an input (an
    initializer, and a Constant node as exporters write them), keepdims 0
    and 1, and a ReduceMax of no axes with noop_with_empty_axes 1 (its
    input); a Split into num_outputs 3 uneven parts, and one by its input
    split. The reference is numpy's."""
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    inits = [i64("pads", [1, 2, 0, 1]), i64("pad_axes", [2, -1]), i64("hw", [2, 3]), i64("last", [-1]),
             i64("ch", [1]), i64("rows", [5, 2])]
    nodes = [
        helper.make_node("Pad", ["x", "pads", "", "pad_axes"], ["p"], mode="reflect"),  # [N, 4, 7, 8]
        helper.make_node("ReduceMean", ["p", "hw"], ["m"]),
        helper.make_node("Sub", ["p", "m"], ["c"]),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [1], [1])),
        helper.make_node("ReduceMax", ["c", "one"], ["mx"], keepdims=0),  # [N, 7, 8]
        helper.make_node("ReduceMin", ["c", "last"], ["mn"], name="rmin"),  # [N, 4, 7, 1]
        helper.make_node("ReduceMax", ["c"], ["same"], noop_with_empty_axes=1),
        helper.make_node("Split", ["same"], ["s0", "s1", "s2"], axis=3, num_outputs=3),  # 3, 3, 2
        helper.make_node("Split", ["c", "rows"], ["t0", "t1"], axis=2),  # 5, 2
        helper.make_node("Mul", ["s0", "s1"], ["prod"]),
        helper.make_node("ReduceMean", ["t0", "ch"], ["tm"], keepdims=0),  # [N, 5, 8]
    ]
    parts = ["mx", "mn", "prod", "s2", "t1", "tm"]
    for name in parts:
        nodes.append(helper.make_node("Flatten", [name], [name + "_flat"]))
    nodes.append(helper.make_node("Concat", [n + "_flat" for n in parts], ["y"], axis=1))
    graph = helper.make_graph(nodes, "opset18", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 328])], inits)
    model = make_model(graph, opset=18)

    x = np.random.default_rng(18).standard_normal((3, 4, 6, 5)).astype(np.float32)
    p = np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)), mode="reflect")
    c = p - p.mean(axis=(2, 3), keepdims=True)
    s0, s1, s2 = c[..., :3], c[..., 3:6], c[..., 6:]
    flat = lambda a: a.reshape(a.shape[0], -1)
    y = np.concatenate([flat(c.max(axis=1)), flat(c.min(axis=-1, keepdims=True)), flat(s0 * s1), flat(s2),
                        flat(c[:, :, 5:]), flat(c[:, :, :5].mean(axis=1))], axis=1).astype(np.float32)
    return model, ({"x": x}, {"y": y})


# Opset 18 (ONNX 1.13), for an onnx package that stops at opset 17 (Debian
# 12's python3-onnx is 1.12): the operators that have a version 18 (onnx's
# onnx/defs/operator_sets.h, OpSet_Onnx_ver18), and the attributes version
# 18 added to those of them goengine runs (the Reduce operators took
# noop_with_empty_axes with their axes input, Split num_outputs; Pad's
# change is its input axes). With an onnx that knows opset 18,
# onnx_versions() checks these against its schemas instead.
OPSET18_OPERATORS = [
    "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "CenterCropPad", "Col2Im", "GroupNormalization",
    "LpPool", "Mish", "OptionalGetElement", "OptionalHasElement", "Pad", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare", "Resize",
    "ScatterElements", "ScatterND", "Split",
]
OPSET18_ATTRIBUTES = {
    "ReduceMax": {"noop_with_empty_axes": "INT"},
    "ReduceMean": {"noop_with_empty_axes": "INT"},
    "ReduceMin": {"noop_with_empty_axes": "INT"},
    "Split": {"num_outputs": "INT"},
}


def onnx_versions():
    """Every default-domain operator's versions up to opset 18, and the
    types of its attributes over them, as JSON: goengine checks its table
    of later versions (opsets.go) and of attribute types (attrs.go) against
    it. They are the onnx package's schemas, and, where it predates opset
    18, OPSET18_OPERATORS and OPSET18_ATTRIBUTES."""
    out, attrs = {}, {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx") and schema.since_version <= 18:
            out.setdefault(schema.name, []).append(schema.since_version)
            for name, a in schema.attributes.items():
                attrs.setdefault(schema.name, {})[name] = onnx.AttributeProto.AttributeType.Name(a.type)
    if onnx.defs.onnx_opset_version() >= 18:
        known = sorted(k for k, v in out.items() if 18 in v)
        assert known == OPSET18_OPERATORS, "opset 18's operators: onnx has %s" % known
        for op, want in OPSET18_ATTRIBUTES.items():
            assert want.items() <= attrs[op].items(), "%s at 18: onnx has %s" % (op, attrs[op])
    else:
        for op in OPSET18_OPERATORS:
            out.setdefault(op, []).append(18)
        for op, extra in OPSET18_ATTRIBUTES.items():
            attrs[op].update(extra)
    doc = {
        "max_opset": 18,
        "versions": {k: sorted(v) for k, v in sorted(out.items())},
        "attributes": {k: dict(sorted(v.items())) for k, v in sorted(attrs.items())},
    }
    return (json.dumps(doc, indent=1) + "\n").encode()


# --- the two output sets -----------------------------------------------------


def write_redis_models(outdir):
    save(linear_model(), outdir, "linear.onnx")
    save(mlp_model(), outdir, "mlp.onnx")
    save(transformer_model(), outdir, "transformer.onnx")
    save(transformer_model(opset=17), outdir, "transformer17.onnx")
    write_bytes(outdir, "onnx_versions.json", onnx_versions())
    save(add_int_model(), outdir, "add_int.onnx")
    save(string_identity_model(), outdir, "string_identity.onnx")
    save(slow_model(), outdir, "slow.onnx")
    save(slow_compile_model(), outdir, "slow_compile.onnx")
    save(unknown_op_model(), outdir, "unknown_op.onnx", check=False)
    save(external_data_model(), outdir, "external_data.onnx", check=False)
    save(no_nodes_model(), outdir, "no_nodes.onnx", check=False)
    save(bad_size_model(), outdir, "bad_size.onnx", check=False)
    write_bytes(outdir, "deep.onnx", deep_bytes())
    write_bytes(outdir, "html.onnx", HTML)
    lin = linear_model().SerializeToString()
    write_bytes(outdir, "truncated.onnx", lin[: len(lin) // 2])
    save(crash_roialign_model(False), outdir, "crash_roialign_run.onnx")
    save(crash_roialign_model(True), outdir, "crash_roialign_store.onnx")
    save(crash_maxunpool_model(), outdir, "crash_maxunpool_run.onnx")
    save(bomb_model(), outdir, "bomb.onnx")
    save(rank_model(), outdir, "rank.onnx")
    save(hang_store_model(), outdir, "hang_store.onnx")
    save(pad_model("reflect"), outdir, "pad_reflect.onnx")
    save(pad_model("reflect", pads=[0, 3, 0, 0]), outdir, "pad_reflect_static.onnx")
    save(pad_model("wrap", opset=19), outdir, "pad_wrap.onnx", check=False)  # this onnx knows opsets to 17
    save(relu_model(), outdir, "relu.onnx")

    refs = {"linear": linear_reference(), "mlp": mlp_reference()}
    cnn = cnn_model_and_reference()
    if cnn is None:
        print("gen_models: PyTorch is not installed; cnn.onnx not written", file=sys.stderr)
    else:
        save(cnn[0], outdir, "cnn.onnx")
        refs["cnn"] = cnn[1]
    for opset in (11, 17):
        t = torch_model_and_reference(opset)
        if t is not None:
            save(t[0], outdir, "torch%d.onnx" % opset)
            refs["torch%d" % opset] = t[1]
    for opset in (11, 13, 14):
        v = vision_model_and_reference(opset)
        if v is not None:
            save(v[0], outdir, "vision%d.onnx" % opset)
            refs["vision%d" % opset] = v[1]
        d = decoder_model_and_reference(opset)
        if d is not None:
            save(d[0], outdir, "decoder%d.onnx" % opset)
            refs["decoder%d" % opset] = d[1]
    o18 = opset18_model_and_reference()
    save(o18[0], outdir, "opset18.onnx", check=False)  # this onnx knows opsets to 17
    refs["opset18"] = o18[1]
    save_refs(outdir, refs)


# Extra models only the Go tests use.


def identity_all_model():
    """One Identity per element type RedisAI knows (plus UINT32/UINT64).
    The inputs and outputs declare no shape (any rank), which the checker of
    onnx 1.12 refuses but ONNX and ORT allow."""
    types = [
        ("f32", TensorProto.FLOAT),
        ("f64", TensorProto.DOUBLE),
        ("i8", TensorProto.INT8),
        ("i16", TensorProto.INT16),
        ("i32", TensorProto.INT32),
        ("i64", TensorProto.INT64),
        ("u8", TensorProto.UINT8),
        ("u16", TensorProto.UINT16),
        ("b", TensorProto.BOOL),
        ("s", TensorProto.STRING),
        ("u32", TensorProto.UINT32),
        ("u64", TensorProto.UINT64),
    ]
    graph = helper.make_graph(
        [helper.make_node("Identity", [n + "_in"], [n + "_out"]) for n, _ in types],
        "identity_all",
        [helper.make_tensor_value_info(n + "_in", t, None) for n, t in types],
        [helper.make_tensor_value_info(n + "_out", t, None) for n, t in types],
    )
    return make_model(graph)


def mixed_outputs_model():
    """Outputs: a tensor, a sequence (not a tensor), a scalar (rank 0) and a
    second tensor."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("SequenceConstruct", ["x", "x"], ["seq"]),
            helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
            helper.make_node("Neg", ["x"], ["neg"]),
        ],
        "mixed_outputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [
            helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", 2]),
            helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, ["N", 2]),
            helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("neg", TensorProto.FLOAT, ["N", 2]),
        ],
    )
    return make_model(graph)


def half_output_model():
    """x FLOAT [N] -> h FLOAT16 [N]: an output type a Tensor cannot hold."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16)],
        "half_output",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["N"])],
    )
    return make_model(graph)


def scalar_io_model():
    """x FLOAT [] (rank 0) -> y = x + x, FLOAT []; s STRING [1] -> t =
    Squeeze(s), STRING []."""
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "x"], ["y"]),
            helper.make_node("Squeeze", ["s", "axes"], ["t"]),
        ],
        "scalar_io",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("s", TensorProto.STRING, [1]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("t", TensorProto.STRING, []),
        ],
        initializer=[numpy_helper.from_array(np.array([0], dtype=np.int64), "axes")],
    )
    return make_model(graph)


def init_as_input_model():
    """IR 3 style: the initializers W and b are also listed as graph inputs,
    after x. ORT reports only x as an input."""
    m = linear_model()
    m.graph.input.extend(
        [
            helper.make_tensor_value_info("W", TensorProto.FLOAT, [4, 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
        ]
    )
    m.ir_version = 3
    m.opset_import[0].version = 9
    return m


def no_inputs_model():
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["y"], value=helper.make_tensor("c", TensorProto.FLOAT, [2], [1.5, 2.5]))],
        "no_inputs",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return make_model(graph)


def write_testdata(outdir):
    save(linear_model(), outdir, "linear.onnx")
    save(add_int_model(), outdir, "add_int.onnx")
    save(string_identity_model(), outdir, "string_identity.onnx")
    save(slow_model(), outdir, "slow.onnx")
    save(unknown_op_model(), outdir, "unknown_op.onnx", check=False)
    save(external_data_model(), outdir, "external_data.onnx", check=False)
    save(no_nodes_model(), outdir, "no_nodes.onnx", check=False)
    save(bad_size_model(), outdir, "bad_size.onnx", check=False)
    save(identity_all_model(), outdir, "identity_all.onnx", check=False)
    save(mixed_outputs_model(), outdir, "mixed_outputs.onnx")
    save(half_output_model(), outdir, "half_output.onnx")
    save(scalar_io_model(), outdir, "scalar_io.onnx")
    save(init_as_input_model(), outdir, "init_as_input.onnx")
    save(no_inputs_model(), outdir, "no_inputs.onnx")
    ins, outs = linear_reference()
    doc = {"linear": ref_entry(ins, outs)}
    write_bytes(outdir, "reference.json", (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--testdata", action="store_true", help="write the Go test models of package modelstore")
    args = p.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    if args.testdata:
        write_testdata(args.outdir)
    else:
        write_redis_models(args.outdir)


if __name__ == "__main__":
    main()
