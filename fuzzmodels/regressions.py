#!/usr/bin/python3
"""Regression models for every crash class the hunt found (`make test`).

    /usr/bin/python3 fuzzmodels/regressions.py modelstore/testdata/crash
    /usr/bin/python3 fuzzmodels/regressions.py --add "<how found>" bin/enclaveai-server findings-seed3.json ...

Writes one model per class to OUTDIR (<name>.onnx) and OUTDIR/index.json:
{name: {"expect": "refused" | "guarded" | "clean", "stage": "store" | "run",
"signal": what it did to ONNX Runtime 1.24.1 unsanitized, "feeds": [...]}}.

  refused  the sanitizer refuses it at store with "model refused: node ..."
  guarded  the sanitizer rewrites its integer division; it stores, and the
           run gives the documented result (x/0 = x, x mod 0 = 0)
  clean    ONNX Runtime itself refuses it or runs it (a resource bomb killed
           by TIMEOUT, say); the server stays up
  contained  it crashes ONNX Runtime on shapes or values the sanitizer
           cannot see, at run or while the session is created: the engine
           worker dies, the server answers "engine worker died" and stays up
           (issue 18)

Classes come from two places: the shrunk findings of the hunt
(fuzzmodels/crashes.json, each a spec that hunt.build turns into a model)
and the hand-written cases below (integer division at every depth and
type, resource bombs). Output is deterministic.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hunt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def model(nodes, inputs, outputs, inits=(), opset=13, functions=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8,
                          functions=list(functions))
    return m.SerializeToString()


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def div_models():
    """Integer Div and Mod in every integer type, at run and folded at
    store, in a Loop body, and a float Div that must stay IEEE."""
    out = {}
    ints = [(TensorProto.INT32, "INT32", np.int32), (TensorProto.INT64, "INT64", np.int64),
            (TensorProto.INT8, "INT8", np.int8), (TensorProto.INT16, "INT16", np.int16),
            (TensorProto.UINT8, "UINT8", np.uint8), (TensorProto.UINT16, "UINT16", np.uint16),
            (TensorProto.UINT32, "UINT32", np.uint32), (TensorProto.UINT64, "UINT64", np.uint64)]
    for t, tname, npt in ints:
        for op in ("Div", "Mod"):
            info = np.iinfo(npt)
            a = [7, -7 if info.min < 0 else 9, info.min, info.max, 0, 5]
            b = [2, 2, -1 if info.min < 0 else 3, 0, 0, 1]
            name = "%s_%s_run" % (op.lower(), tname.lower())
            out[name] = (model([helper.make_node(op, ["a", "b"], ["c"], name="div0")],
                               [vi("a", t, [6]), vi("b", t, [6])], [vi("c", t, [6])], opset=14),
                         {"expect": "guarded", "stage": "run", "signal": "SIGFPE",
                          "feeds": [["a", tname, [6], a], ["b", tname, [6], b]]})
    # Folded while the session is created: both operands are initializers.
    for op in ("Div", "Mod"):
        nodes = [helper.make_node(op, ["a", "b"], ["q"], name="fold0"),
                 helper.make_node("Add", ["q", "x"], ["y"], name="add0")]
        inits = [helper.make_tensor("a", TensorProto.INT64, [2], [5, -2**63]),
                 helper.make_tensor("b", TensorProto.INT64, [2], [0, -1])]
        out["%s_int64_folded" % op.lower()] = (
            model(nodes, [vi("x", TensorProto.INT64, [2])], [vi("y", TensorProto.INT64, [2])], inits),
            {"expect": "guarded", "stage": "store", "signal": "SIGFPE",
             "feeds": [["x", "INT64", [2], [0, 0]]]})
    # In a Loop body, two levels deep, with the divisor from the outer scope.
    inner = helper.make_graph(
        [helper.make_node("Div", ["acc_in", "d"], ["q"], name="deepdiv"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "inner", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                  vi("acc_in", TensorProto.INT32, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("q", TensorProto.INT32, [2])])
    outer = helper.make_graph(
        [helper.make_node("Loop", ["one", "", "acc_in"], ["acc_out"], name="innerloop", body=inner),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "outer", [vi("j", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                  vi("acc_in", TensorProto.INT32, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.INT32, [2])])
    nodes = [helper.make_node("Loop", ["two", "", "x"], ["y"], name="outerloop", body=outer)]
    inits = [helper.make_tensor("one", TensorProto.INT64, [], [1]),
             helper.make_tensor("two", TensorProto.INT64, [], [2])]
    out["div_in_loop"] = (model(nodes, [vi("x", TensorProto.INT32, [2]), vi("d", TensorProto.INT32, [2])],
                                [vi("y", TensorProto.INT32, [2])], inits),
                          {"expect": "guarded", "stage": "run", "signal": "SIGFPE",
                           "feeds": [["x", "INT32", [2], [100, -2**31]], ["d", "INT32", [2], [0, -1]]]})
    # Float division keeps IEEE semantics: 1/0 = inf, 0/0 = NaN.
    out["div_float"] = (model([helper.make_node("Div", ["a", "b"], ["c"], name="fdiv")],
                              [vi("a", TensorProto.FLOAT, [3]), vi("b", TensorProto.FLOAT, [3])],
                              [vi("c", TensorProto.FLOAT, [3])]),
                        {"expect": "clean", "stage": "run", "signal": "",
                         "feeds": [["a", "FLOAT", [3], [1, -1, 0]], ["b", "FLOAT", [3], [0, 0, 0]]]})
    return out


def spatial_models():
    """The classes issue 16 names: strides 0 in Conv and the pools."""
    out = {}
    x = vi("x", TensorProto.FLOAT, [1, 1, 4, 4])
    y = onnx.ValueInfoProto(name="y")
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 2, 2], [1.0] * 4)
    out["conv_strides0"] = (model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0", strides=[0, 1])],
                                  [x], [y], [w]), {"expect": "refused", "stage": "store", "signal": "SIGFPE"})
    out["convtranspose_strides0"] = (model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="convt0",
                                                             strides=[1, 0])], [x], [y], [w]),
                                     {"expect": "refused", "stage": "store", "signal": "SIGFPE"})
    for op in ("MaxPool", "AveragePool", "LpPool"):
        out[op.lower() + "_strides0"] = (
            model([helper.make_node(op, ["x"], ["y"], name="pool0", kernel_shape=[2, 2], strides=[0, 0])], [x], [y]),
            {"expect": "refused", "stage": "store", "signal": "SIGFPE"})
    out["conv_group_mismatch"] = (model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", group=3)],
                                        [x], [y], [w]), {"expect": "refused", "stage": "store", "signal": ""})
    out["conv_pads_length"] = (model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv2", pads=[1, 1])],
                                     [x], [y], [w]), {"expect": "refused", "stage": "store", "signal": ""})
    return out


def bomb_models():
    """Shapes that ask for 10^12 elements, and a Loop of 2^62 trips."""
    out = {}
    y = onnx.ValueInfoProto(name="y")
    big = helper.make_tensor("shape", TensorProto.INT64, [2], [10**6, 10**6])
    out["bomb_constantofshape"] = (
        model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos"),
               helper.make_node("Add", ["c", "x"], ["y"], name="add")],
              [vi("x", TensorProto.FLOAT, [1])], [y], [big]),
        {"expect": "refused", "stage": "store", "signal": "memory"})
    out["bomb_expand"] = (
        model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")],
              [vi("x", TensorProto.FLOAT, [1])], [y], [big]),
        {"expect": "refused", "stage": "run", "signal": "memory"})
    out["bomb_reshape"] = (
        model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
              [vi("x", TensorProto.FLOAT, [1])], [y], [big]),
        {"expect": "refused", "stage": "run", "signal": ""})
    out["bomb_tile"] = (
        model([helper.make_node("Tile", ["x", "shape"], ["y"], name="tile")],
              [vi("x", TensorProto.FLOAT, [1, 1])], [y], [big]),
        {"expect": "refused", "stage": "run", "signal": "memory"})
    out["bomb_range"] = (
        model([helper.make_node("Range", ["s", "l", "d"], ["r"], name="range"),
               helper.make_node("Add", ["r", "x"], ["y"], name="add")],
              [vi("x", TensorProto.INT64, [1])], [y],
              [helper.make_tensor("s", TensorProto.INT64, [], [0]),
               helper.make_tensor("l", TensorProto.INT64, [], [10**12]),
               helper.make_tensor("d", TensorProto.INT64, [], [1])]),
        {"expect": "refused", "stage": "store", "signal": "memory"})
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "acc_in"], ["acc_out"])],
        "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                 vi("acc_in", TensorProto.FLOAT, [1])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.FLOAT, [1])])
    out["bomb_loop_trips"] = (
        model([helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop", body=body)],
              [vi("x", TensorProto.FLOAT, [1])], [vi("y", TensorProto.FLOAT, [1])],
              [helper.make_tensor("m", TensorProto.INT64, [], [2**62])]),
        {"expect": "clean", "stage": "run", "signal": "hang", "timeout": True,
         "feeds": [["x", "FLOAT", [1], [1.0]]]})
    return out


def hunt_models():
    """The hunt's shrunk findings (fuzzmodels/crashes.json)."""
    out = {}
    path = os.path.join(HERE, "crashes.json")
    if not os.path.exists(path):
        return out
    for c in json.load(open(path)):
        blob, feeds = hunt.build(c["spec"])
        out[c["name"]] = (blob, {"expect": c.get("expect", "refused"), "stage": c["stage"], "signal": c["signal"],
                                 "outputs": c["spec"]["nout"],
                                 "feeds": [[n, hunt.FEEDABLE[t][0], s, [json_number(x) for x in v]]
                                           for n, t, s, v in feeds]})
    return out


def json_number(x):
    """x, or its name when JSON has no number for it (NaN, infinities)."""
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    return x


def add_findings(paths, source, binary):
    """Appends the findings of hunt runs to crashes.json, one per class
    (operator, stage, signal) not recorded yet, each with what the server
    binary does with it now: "refused" by the sanitizer, or "contained" (an
    engine worker died of it and the server answered)."""
    path = os.path.join(HERE, "crashes.json")
    crashes = json.load(open(path)) if os.path.exists(path) else []
    names = {c["name"] for c in crashes}
    srv = hunt.Server(binary, 2 << 30, 8 << 30)
    srv.start()
    try:
        for p in paths:
            for f in json.load(open(p))["findings"]:
                name = "hunt_%s_%s_%s" % (f["op"].lower(), f["stage"], f["signal"].lower().replace("worker:", ""))
                if name in names:
                    continue
                out, stage, detail = hunt.try_model(srv, f["spec"], 20)
                if out == "refused" and detail.startswith("model refused"):
                    expect = "refused"
                elif out == "finding" and detail.startswith("worker:"):
                    expect = "contained"
                elif f["op"] in ("Div", "Mod") and out in ("ok", "refused"):
                    expect = "guarded"
                else:
                    print("not recorded (%s %s %s): %s" % (out, stage, detail, name))
                    continue
                names.add(name)
                crashes.append({"name": name, "op": f["op"], "stage": f["stage"], "signal": f["signal"],
                                "expect": expect, "found": source, "spec": f["spec"]})
                print("recorded", name, expect)
    finally:
        srv.stop()
    with open(path, "w") as out:
        json.dump(crashes, out, indent=1)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--add":
        add_findings(sys.argv[4:], sys.argv[2], sys.argv[3])
        return
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "modelstore", "testdata", "crash")
    os.makedirs(outdir, exist_ok=True)
    index = {}
    for gen in (div_models, spatial_models, bomb_models, hunt_models):
        for name, (blob, meta) in gen().items():
            with open(os.path.join(outdir, name + ".onnx"), "wb") as f:
                f.write(blob)
            meta.setdefault("feeds", [])
            index[name] = meta
    with open(os.path.join(outdir, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %d regression models to %s" % (len(index), outdir))


if __name__ == "__main__":
    main()
