#!/usr/bin/python3
"""Generate a huge ONNX model in memory, for the huge-model tests and bench.

    model = huge_model.build(1_300_000_000)    # about 1.3 GB
    model.data                                 # mmap: the .onnx bytes
    model.x, model.y                           # an input and its expected output

    /usr/bin/python3 redis_tests/models/huge_model.py OUT.onnx [--size BYTES]

The graph is y = Relu(x @ W1 + b1) @ W2 + b2 with x FLOAT [1, K]: two large
MatMul weights (W1 [K, H], W2 [H, K]) of half the size each, so chunk
boundaries of a chunked upload fall inside initializers. The bytes are a
valid ModelProto with the initializers' raw_data inline, written field by
field (the two big initializers follow the graph's other fields): onnx's own
SerializeToString would copy a model this size several times and refuses
one above 2 GB. Weights come from a fixed seed, so the same size gives the same
bytes; the reference output is computed in float64 while the weights are
generated, block by block, and never needs a second copy of them.
"""

import argparse
import mmap
import os

import numpy as np
from onnx import TensorProto, helper

from gen_models import IR_VERSION, OPSET, varint  # one definition of the wire helpers

K = 4096       # input and output width
H_ALIGN = 128  # hidden width is a multiple of this
SEED = 20240917
ROWS = 256     # rows of a weight generated at once


def field(num, payload):
    """A length-delimited protobuf field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


class HugeModel:
    """The model bytes with one reference input and output."""

    def __init__(self, data, x, y, hidden):
        self.data = data
        self.x = x
        self.y = y
        self.hidden = hidden


def build(size):
    """A model of about `size` bytes (at least one hidden block)."""
    hidden = max(H_ALIGN, -(-size // (2 * K * 4 * H_ALIGN)) * H_ALIGN)
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((1, K)).astype(np.float32)
    b1 = rng.standard_normal(hidden).astype(np.float32) * 0.1
    b2 = rng.standard_normal(K).astype(np.float32) * 0.1

    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W1"], ["xw"]),
            helper.make_node("Add", ["xw", "b1"], ["h0"]),
            helper.make_node("Relu", ["h0"], ["h"]),
            helper.make_node("MatMul", ["h", "W2"], ["hw"]),
            helper.make_node("Add", ["hw", "b2"], ["y"]),
        ],
        "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, K])],
        initializer=[
            helper.make_tensor("b1", TensorProto.FLOAT, [hidden], b1.tobytes(), raw=True),
            helper.make_tensor("b2", TensorProto.FLOAT, [K], b2.tobytes(), raw=True),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="enclaveai-huge_model")
    model.ir_version = IR_VERSION
    # The big initializers are appended to the graph's serialization by hand:
    # protobuf concatenates repeated fields, so this is the same GraphProto.
    graph_head = model.graph.SerializeToString()
    model.ClearField("graph")
    model_head = model.SerializeToString()

    heads = []
    for name, dims in (("W1", [K, hidden]), ("W2", [hidden, K])):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims).SerializeToString()
        nbytes = dims[0] * dims[1] * 4
        raw_head = varint(9 << 3 | 2) + varint(nbytes)  # TensorProto.raw_data
        tensor_len = len(t) + len(raw_head) + nbytes
        heads.append((t + raw_head, nbytes, varint(5 << 3 | 2) + varint(tensor_len)))
    graph_len = len(graph_head) + sum(len(h[2]) + len(h[0]) + h[1] for h in heads)
    prefix = model_head + varint(7 << 3 | 2) + varint(graph_len) + graph_head

    total = len(prefix) + sum(len(h[2]) + len(h[0]) + h[1] for h in heads)
    data = alloc(total)
    view = np.frombuffer(data, dtype=np.uint8)
    pos = 0

    def put(b):
        nonlocal pos
        view[pos:pos + len(b)] = np.frombuffer(b, dtype=np.uint8)
        pos += len(b)

    # Block buffers are reused: on this kind of machine, first writes to
    # fresh memory cost more than everything else here.
    blk = np.empty((ROWS, max(hidden, K)), dtype=np.float32)
    blk64 = np.empty(blk.shape, dtype=np.float64)

    def weight_rows(rows, cols, scale):
        """Yields (r, n, block as float64) for the next rows of a weight,
        written into data as they are generated."""
        nonlocal pos
        for r in range(0, rows, ROWS):
            n = min(ROWS, rows - r)
            b = blk.reshape(-1)[:n * cols].reshape(n, cols)
            b64 = blk64.reshape(-1)[:n * cols].reshape(n, cols)
            rng.random(out=b, dtype=np.float32)
            b -= np.float32(0.5)
            b *= np.float32(scale)
            view[pos:pos + b.nbytes] = b.reshape(-1).view(np.uint8)
            pos += b.nbytes
            np.copyto(b64, b)
            yield r, n, b64

    put(prefix)
    # W1: h0 = x @ W1 + b1, accumulated over row blocks of W1.
    put(heads[0][2] + heads[0][0])
    h0 = b1.astype(np.float64)
    for r, n, b in weight_rows(K, hidden, 2.0 / np.sqrt(K)):
        h0 += x[0, r:r + n].astype(np.float64) @ b
    h = np.maximum(h0, 0)
    # W2: y = h @ W2 + b2.
    put(heads[1][2] + heads[1][0])
    y = b2.astype(np.float64)
    for r, n, b in weight_rows(hidden, K, 2.0 / np.sqrt(hidden)):
        y += h[r:r + n] @ b
    assert pos == total
    return HugeModel(data, x, y.astype(np.float32).reshape(1, K), hidden)


def alloc(size):
    """Anonymous memory advised for huge pages: filling 1.3 GB of fresh 4 KiB
    pages takes seconds here, huge pages a fraction of that."""
    m = mmap.mmap(-1, size)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE)
    return m


def chunks(data, n):
    """Splits data into n nearly equal memoryview chunks (no copies)."""
    mv = memoryview(data)
    size = -(-len(data) // n)
    return [mv[i:i + size] for i in range(0, len(data), size)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--size", type=int, default=1_300_000_000)
    args = p.parse_args()
    m = build(args.size)
    with open(args.out + ".tmp", "wb") as f:
        f.write(m.data)
    os.replace(args.out + ".tmp", args.out)
    np.savez(args.out + ".ref.npz", x=m.x, y=m.y)


if __name__ == "__main__":
    main()
