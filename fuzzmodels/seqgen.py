"""Specs for the operators whose inputs or outputs are sequences, optionals
or maps, which hunt.gen_spec cannot build as one node fed with tensors.

The operator under test is still the spec's one node "n0" with its
attributes and inputs, so that hunt.shrink works on it unchanged; an input
may also be a sequence ({"seq": ...}) or an optional ({"opt": ...}), which
hunt.build makes with producer nodes before n0 (SequenceConstruct,
SplitToSequence, SequenceEmpty, Optional), and "post" names a consumer
after n0 that turns its sequence or optional output back into a tensor
(SequenceLength, ConcatFromSequence, SequenceAt, OptionalHasElement,
OptionalGetElement), since the server returns tensors only.

The control-flow operators (If, Loop, Scan, SequenceMap) get generated
bodies: an If branch is a generated node of another operator over
constants, a Loop or SequenceMap body one unary step (Identity, Neg, Abs,
Add of the value to itself, or Concat, which doubles it each trip), a
Scan body a running sum; trip counts, conditions, axes and directions are
degenerate as the hunt's attributes are.

ZipMap, CastMap and DictVectorizer are tried at AI.MODELSTORE only: no
client can feed a map, and no operator turns ZipMap's sequence of maps
back into a tensor, so ONNX Runtime never runs them for the server.
"""

import onnx
from onnx import TensorProto, helper

ELEM = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.DOUBLE,
        TensorProto.UINT8, TensorProto.BOOL]

# The operator, what its output is (post consumers that fit it), and how
# its inputs are made.
SEQ_OPS = {
    "SequenceAt": "tensor", "SequenceLength": "tensor", "ConcatFromSequence": "tensor",
    "SequenceErase": "seq", "SequenceInsert": "seq", "SequenceConstruct": "seq",
    "SequenceEmpty": "seq", "SplitToSequence": "seq",
    "Optional": "opt", "OptionalHasElement": "tensor", "OptionalGetElement": "tensor",
    "ZipMap": "store", "CastMap": "store", "DictVectorizer": "store",
    "If": "tensor", "Loop": "tensor", "Scan": "tensor", "SequenceMap": "seq",
}
POST = {"seq": ["length", "concat", "at", "at_last"], "opt": ["has", "get"]}


def covers(name):
    return name in SEQ_OPS


def _tensor(rnd, hunt, et, base, scalar=False):
    """A tensor input dict as hunt.gen_spec makes them."""
    shape = [] if scalar else hunt.rand_shape(rnd, base)
    vals = hunt.rand_values(rnd, et, shape)
    const = rnd.random() < 0.45 or et not in hunt.FEEDABLE
    return {"type": et, "shape": shape, "const": const, "values": vals,
            "decl": rnd.choice(["fixed", "fixed", "symbolic", "none"])}


def _position(rnd, hunt):
    """A position input: a scalar or a 1-element int64/int32 tensor, often
    out of range."""
    et = rnd.choice([TensorProto.INT64, TensorProto.INT32])
    t = _tensor(rnd, hunt, et, [1], scalar=rnd.random() < 0.7)
    n = len(t["values"])
    t["values"] = [rnd.choice([0, 1, -1, 2, -2, 5, 2**31 - 1, -2**31] if et == TensorProto.INT32 else
                              [0, 1, -1, 2, -2, 5, 2**62, -2**63, 2**63 - 1]) for _ in range(n)]
    return t


def _sequence(rnd, hunt, et, base):
    """A sequence input: made by SequenceConstruct, SplitToSequence or
    SequenceEmpty."""
    how = rnd.choice(["construct", "construct", "split", "empty"])
    if how == "construct":
        items = [_tensor(rnd, hunt, et, base) for _ in range(rnd.randint(1, 3))]
        if rnd.random() < 0.7:  # most sequences hold alike tensors
            for it in items[1:]:
                it["shape"] = list(items[0]["shape"])
                it["values"] = hunt.rand_values(rnd, et, it["shape"])
        return {"seq": {"how": "construct", "items": items}}
    if how == "split":
        attrs = {}
        if rnd.random() < 0.6:
            attrs["axis"] = rnd.choice(hunt.INTS) if rnd.random() < 0.4 else rnd.randint(-2, 2)
        if rnd.random() < 0.4:
            attrs["keepdims"] = rnd.choice([0, 1, -1, 2])
        split = None
        if rnd.random() < 0.5:
            split = _tensor(rnd, hunt, TensorProto.INT64, [rnd.randint(0, 3)], scalar=rnd.random() < 0.3)
            split["values"] = [rnd.choice([0, 1, 2, -1, 2**62]) for _ in split["values"]]
        return {"seq": {"how": "split", "tensor": _tensor(rnd, hunt, et, base), "split": split, "attrs": attrs}}
    return {"seq": {"how": "empty", "dtype": et if rnd.random() < 0.8 else rnd.choice(hunt.INTS)}}


def _optional(rnd, hunt, et, base):
    """An optional input: Optional of a tensor, or an empty one."""
    if rnd.random() < 0.7:
        return {"opt": {"tensor": _tensor(rnd, hunt, et, base), "type": et}}
    return {"opt": {"tensor": None, "type": et}}


def gen(rnd, hunt, s, opset):
    """A spec of schema s (one of SEQ_OPS), or None."""
    name = s.name
    et = rnd.choice(ELEM)
    base = [rnd.choice([1, 2, 3]) for _ in range(rnd.choice([1, 2, 3]))]
    inputs, attrs, post, nout = [], {}, None, 1
    kind = SEQ_OPS[name]
    if name in ("SequenceAt", "SequenceErase", "SequenceInsert", "SequenceLength", "ConcatFromSequence"):
        inputs.append(_sequence(rnd, hunt, et, base))
        if name == "SequenceInsert":
            inputs.append(_tensor(rnd, hunt, et if rnd.random() < 0.9 else rnd.choice(ELEM), base))
        if name in ("SequenceAt", "SequenceErase", "SequenceInsert") and (name == "SequenceAt" or rnd.random() < 0.7):
            inputs.append(_position(rnd, hunt))
        if name == "ConcatFromSequence":
            attrs["axis"] = rnd.choice(hunt.INTS) if rnd.random() < 0.4 else rnd.randint(-3, 3)
            if rnd.random() < 0.6:
                attrs["new_axis"] = rnd.choice([0, 1, -1, 2])
    elif name == "SequenceConstruct":
        inputs = [_tensor(rnd, hunt, et, base) for _ in range(rnd.randint(1, 3))]
    elif name == "SequenceEmpty":
        if rnd.random() < 0.8:
            attrs["dtype"] = et if rnd.random() < 0.6 else rnd.choice(hunt.INTS)
    elif name == "SplitToSequence":
        seq = _sequence(rnd, hunt, et, base)["seq"]
        if seq["how"] != "split":
            seq = _sequence(rnd, hunt, et, base)["seq"]
        if seq["how"] == "split":
            inputs.append(seq["tensor"])
            if seq["split"] is not None:
                inputs.append(seq["split"])
            attrs = dict(seq["attrs"])
        else:
            inputs.append(_tensor(rnd, hunt, et, base))
    elif name == "Optional":
        if rnd.random() < 0.7:
            inputs.append(_tensor(rnd, hunt, et, base))
        if not inputs or rnd.random() < 0.3:
            attrs["type"] = {"type_proto": [et, None]}
    elif name in ("OptionalHasElement", "OptionalGetElement"):
        inputs.append(_optional(rnd, hunt, et, base))
    elif name == "ZipMap":
        inputs.append(_tensor(rnd, hunt, TensorProto.FLOAT, base))
        n = rnd.choice([0, 1, 2, 3, 10])
        if rnd.random() < 0.5:
            attrs["classlabels_int64s"] = [rnd.choice(hunt.INTS) for _ in range(n)]
        else:
            attrs["classlabels_strings"] = [rnd.choice(hunt.STRINGS) for _ in range(n)]
    elif name == "If":
        cond = _tensor(rnd, hunt, TensorProto.BOOL, [1], scalar=rnd.random() < 0.8)
        inputs.append(cond)
        then = _branch(rnd, hunt, opset, "t")
        other = _branch(rnd, hunt, opset, "e")
        if then is None or other is None:
            return None
        attrs["then_branch"], attrs["else_branch"] = then, other
        et = then["graph"]["spec"]["out_types"][0] or TensorProto.FLOAT
    elif name == "Loop":
        et = rnd.choice([TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32])
        trips = _tensor(rnd, hunt, TensorProto.INT64, [1], scalar=rnd.random() < 0.8)
        # Huge trip counts run to the TIMEOUT: now and then only, or they
        # would take most of the hunt's time.
        trips["values"] = [rnd.choice([0, 1, 2, 3, 5, -1]) if rnd.random() < 0.9 else rnd.choice([2**62, 2**63 - 1])
                           for _ in trips["values"]]
        inputs.append(trips if rnd.random() < 0.85 else None)
        inputs.append(_tensor(rnd, hunt, TensorProto.BOOL, [1], scalar=rnd.random() < 0.8) if rnd.random() < 0.7 else None)
        inputs.append(_tensor(rnd, hunt, et, base))
        scan_out = rnd.random() < 0.4
        attrs["body"] = {"graph": {"kind": "loop", "type": et, "step": rnd.choice(STEPS), "scan": scan_out,
                                   "axis": rnd.choice([0, 0, 1, -1, 5])}}
    elif name == "Scan":
        et = rnd.choice([TensorProto.FLOAT, TensorProto.INT64])
        x = _tensor(rnd, hunt, et, [rnd.choice([0, 1, 2, 3])] + base)
        state = _tensor(rnd, hunt, et, x["shape"][1:] if x["shape"] else [])
        inputs += [state, x]
        attrs["body"] = {"graph": {"kind": "scan", "type": et}}
        attrs["num_scan_inputs"] = 1 if rnd.random() < 0.7 else rnd.choice(hunt.INTS)
        for a in ("scan_input_axes", "scan_output_axes"):
            if rnd.random() < 0.4:
                attrs[a] = [rnd.choice([0, 1, -1, 3, 2**62]) for _ in range(rnd.choice([0, 1, 1, 2]))]
        for a in ("scan_input_directions", "scan_output_directions"):
            if rnd.random() < 0.3:
                attrs[a] = [rnd.choice([0, 1, -1, 2]) for _ in range(rnd.choice([0, 1, 1, 2]))]
        nout = 2
    elif name == "SequenceMap":
        inputs.append(_sequence(rnd, hunt, et, base))
        attrs["body"] = {"graph": {"kind": "map", "type": et, "step": rnd.choice(STEPS)}}
    elif name in ("CastMap", "DictVectorizer"):
        inputs.append({"map": rnd.choice([TensorProto.INT64, TensorProto.STRING])})
        if name == "CastMap":
            if rnd.random() < 0.7:
                attrs["cast_to"] = rnd.choice(["TO_FLOAT", "TO_STRING", "TO_INT64", "x", ""])
            if rnd.random() < 0.5:
                attrs["map_form"] = rnd.choice(["DENSE", "SPARSE", ""])
            if rnd.random() < 0.5:
                attrs["max_map"] = rnd.choice(hunt.INTS)
        elif rnd.random() < 0.5:
            attrs["int64_vocabulary"] = [rnd.choice(hunt.INTS) for _ in range(rnd.randint(0, 4))]
        else:
            attrs["string_vocabulary"] = [rnd.choice(hunt.STRINGS) for _ in range(rnd.randint(0, 4))]
    else:
        return None
    if kind in POST:
        post = rnd.choice(POST[kind])
    out_type = {"SequenceLength": TensorProto.INT64, "OptionalHasElement": TensorProto.BOOL}.get(name, et)
    if post in ("length",):
        out_type = TensorProto.INT64
    if post == "has":
        out_type = TensorProto.BOOL
    if name == "SequenceEmpty" and post != "length":
        out_type = attrs.get("dtype", TensorProto.FLOAT)
        if out_type not in ELEM:
            out_type = TensorProto.FLOAT  # an invalid dtype: refused at store
    if name in ("ZipMap", "CastMap", "DictVectorizer"):
        out_type = None
    if name == "Loop":
        nout = 2 if attrs["body"]["graph"]["scan"] else 1
    if name in ("Loop", "Scan"):
        return {"op": name, "domain": s.domain, "opset": opset, "inputs": inputs, "attrs": attrs,
                "nout": nout, "out_types": [et] * nout, "post": None}
    return {"op": name, "domain": s.domain, "opset": opset, "inputs": inputs, "attrs": attrs,
            "nout": 1, "out_types": [out_type], "post": post}


def build_input(hunt, i, inp, add_tensor, nodes, graph_inputs):
    """Makes input i of n0 when it is a sequence, optional or map; returns
    its value's name, or None when inp is a tensor (hunt.build's own)."""
    name = "in%d" % i
    if "seq" in inp:
        q = inp["seq"]
        if q["how"] == "construct":
            names = [add_tensor("%s_%d" % (name, k), t) for k, t in enumerate(q["items"])]
            nodes.append(helper.make_node("SequenceConstruct", names, [name], name="p%d" % i))
        elif q["how"] == "split":
            ins = [add_tensor(name + "_t", q["tensor"])]
            if q["split"] is not None:
                ins.append(add_tensor(name + "_s", q["split"]))
            nodes.append(helper.make_node("SplitToSequence", ins, [name], name="p%d" % i, **q["attrs"]))
        else:
            nodes.append(helper.make_node("SequenceEmpty", [], [name], name="p%d" % i, dtype=q["dtype"]))
        return name
    if "opt" in inp:
        o = inp["opt"]
        if o["tensor"] is not None:
            nodes.append(helper.make_node("Optional", [add_tensor(name + "_t", o["tensor"])], [name], name="p%d" % i))
        else:
            nodes.append(helper.make_node("Optional", [], [name], name="p%d" % i,
                                          type=helper.make_tensor_type_proto(o["type"], None)))
        return name
    if "map" in inp:
        kt = inp["map"]
        vt = TensorProto.FLOAT
        graph_inputs.append(helper.make_value_info(name, map_type(kt, vt)))
        return name
    return None


def attr_value(hunt, k, v):
    """A TypeProto attribute (Optional's type) or a body graph, or None for
    the others."""
    if isinstance(v, dict) and "type_proto" in v:
        et, shape = v["type_proto"]
        return helper.make_tensor_type_proto(et, shape)
    if isinstance(v, dict) and "graph" in v:
        return body(hunt, k, v["graph"])
    return None


# A Loop or SequenceMap body's step on its value.
STEPS = ["Identity", "Neg", "Abs", "Add", "Concat"]


_plain = {}  # opset: the schemas an If branch may use


def _branch(rnd, hunt, opset, prefix):
    """An If branch: a generated node of another tensor operator, its
    inputs constants of the branch."""
    if opset not in _plain:
        _plain[opset] = [x for x in hunt.schemas() if not covers(x[0].name) and x[1] == opset]
    plain = _plain[opset]
    for _ in range(20):
        s2, _ = rnd.choice(plain)
        spec = hunt.gen_spec(rnd, s2, opset)
        if spec and spec["out_types"] and spec["out_types"][0]:
            for inp in spec["inputs"]:
                if inp is not None:
                    inp["const"] = True
            return {"graph": {"kind": "branch", "prefix": prefix, "spec": spec}}
    return None


def _step(step, x, y, name):
    if step in ("Add", "Concat"):
        kw = {"axis": 0} if step == "Concat" else {}
        return helper.make_node(step, [x, x], [y], name=name, **kw)
    return helper.make_node(step, [x], [y], name=name)


def body(hunt, attr, g):
    """The GraphProto of a generated body."""
    kind = g["kind"]
    if kind == "branch":
        p, spec = g["prefix"], g["spec"]
        inits, ins = [], []
        for i, inp in enumerate(spec["inputs"]):
            if inp is None:
                ins.append("")
                continue
            n = "%s_in%d" % (p, i)
            inits.append(hunt.tensor_proto(n, inp["type"], inp["shape"], inp["values"]))
            ins.append(n)
        attrs = {}
        for k, v in spec["attrs"].items():
            if isinstance(v, dict):
                et, shape, vals = v["tensor"]
                v = hunt.tensor_proto(k, et, shape, vals)
            attrs[k] = v
        outs = ["%s_out%d" % (p, i) for i in range(spec["nout"])]
        node = helper.make_node(spec["op"], ins, outs, name=p + "_n", domain=spec["domain"], **attrs)
        out = helper.make_tensor_value_info(outs[0], spec["out_types"][0], None)
        return helper.make_graph([node], p, [], [out], inits)
    et = g["type"]
    if kind == "loop":
        nodes = [helper.make_node("Identity", ["b_c"], ["b_c_out"], name="b_id"),
                 _step(g["step"], "b_v", "b_v_out", "b_step")]
        outs = [helper.make_tensor_value_info("b_c_out", TensorProto.BOOL, []),
                helper.make_tensor_value_info("b_v_out", et, None)]
        if g["scan"]:
            nodes.append(helper.make_node("Identity", ["b_v"], ["b_scan"], name="b_scan_id"))
            outs.append(helper.make_tensor_value_info("b_scan", et, None))
        ins = [helper.make_tensor_value_info("b_i", TensorProto.INT64, []),
               helper.make_tensor_value_info("b_c", TensorProto.BOOL, []),
               helper.make_tensor_value_info("b_v", et, None)]
        return helper.make_graph(nodes, "loop_body", ins, outs)
    if kind == "scan":
        nodes = [helper.make_node("Add", ["b_s", "b_x"], ["b_s_out"], name="b_add"),
                 helper.make_node("Identity", ["b_x"], ["b_y"], name="b_id")]
        ins = [helper.make_tensor_value_info("b_s", et, None), helper.make_tensor_value_info("b_x", et, None)]
        outs = [helper.make_tensor_value_info("b_s_out", et, None), helper.make_tensor_value_info("b_y", et, None)]
        return helper.make_graph(nodes, "scan_body", ins, outs)
    if kind == "map":
        nodes = [_step(g["step"], "b_x", "b_y", "b_step")]
        return helper.make_graph(nodes, "map_body", [helper.make_tensor_value_info("b_x", et, None)],
                                 [helper.make_tensor_value_info("b_y", et, None)])
    raise ValueError(kind)


def post_nodes(spec, main_out, final_out):
    """The consumer after n0 that makes a tensor of its output."""
    post = spec.get("post")
    if post is None:
        return [], main_out
    if post == "length":
        return [helper.make_node("SequenceLength", [main_out], [final_out], name="q")], final_out
    if post == "concat":
        return [helper.make_node("ConcatFromSequence", [main_out], [final_out], name="q", axis=0)], final_out
    if post in ("at", "at_last"):
        pos = helper.make_tensor("q_pos", TensorProto.INT64, [], [0 if post == "at" else -1])
        return [helper.make_node("Constant", [], ["q_pos_v"], name="qc", value=pos),
                helper.make_node("SequenceAt", [main_out, "q_pos_v"], [final_out], name="q")], final_out
    if post == "has":
        return [helper.make_node("OptionalHasElement", [main_out], [final_out], name="q")], final_out
    if post == "get":
        return [helper.make_node("OptionalGetElement", [main_out], [final_out], name="q")], final_out
    raise ValueError(post)


def store_only_output(spec, out):
    """The output of an operator tried at store only (its value info)."""
    if spec["op"] == "ZipMap":
        m = map_type(TensorProto.INT64 if "classlabels_int64s" in spec["attrs"] else TensorProto.STRING, TensorProto.FLOAT)
        return helper.make_value_info(out, helper.make_sequence_type_proto(m))
    et = TensorProto.FLOAT
    if spec["op"] == "CastMap" and spec["attrs"].get("cast_to") == "TO_STRING":
        et = TensorProto.STRING
    if spec["op"] == "CastMap" and spec["attrs"].get("cast_to") == "TO_INT64":
        et = TensorProto.INT64
    return helper.make_tensor_value_info(out, et, None)


def map_type(key, value):
    """The TypeProto of a map from key to tensors of value (onnx 1.14's
    helper has no make_map_type_proto)."""
    tp = onnx.TypeProto()
    tp.map_type.key_type = key
    tp.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(value, None))
    return tp
