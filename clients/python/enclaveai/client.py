"""The EnclaveAI client: attest, upload, run, delete (on top of redis-py)."""

import hashlib
import os
import secrets
import ssl
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import bisect

import numpy as np
import redis
from redis import exceptions
from redis.crc import key_slot

from . import attest as _attest
from . import resp3 as _resp
from .attest import AttestationError, Policy, Result

# RedisAI data types and their numpy equivalents.
DTYPES = {
    "FLOAT": np.float32, "DOUBLE": np.float64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "BOOL": np.bool_,
}
_NP_TO_AI = {np.dtype(v): k for k, v in DTYPES.items()}

# What is read from a file and sent at a time: the progress bar moves by
# this much, and it is all the memory the client needs for an upload.
SEND_STEP = 4 << 20

# How many times a call follows a cluster's redirections (MOVED, ASK,
# TRYAGAIN) before it gives up.
_REDIRECTS = 5


class Output:
    """One output tensor of a run."""

    def __init__(self, name: str, dtype: str, shape: List[int], data: bytes):
        self.name, self.dtype, self.shape, self._data = name, dtype, shape, data

    def as_numpy(self) -> np.ndarray:
        """The tensor as a numpy array of its shape and type; a STRING
        tensor as an object array of bytes."""
        if self.dtype == "STRING":
            # Each element ends with a 0 byte (REDISAI.md, STRING blobs).
            elems = self._data.split(b"\0")[:-1] if self._data else []
            arr = np.empty(len(elems), dtype=object)
            arr[:] = elems
            return arr.reshape(self.shape)
        return np.frombuffer(self._data, dtype=DTYPES[self.dtype]).reshape(self.shape)

    def as_torch(self):
        """The tensor as a torch.Tensor (torch is imported on first use);
        torch has no strings, so not for a STRING tensor."""
        if self.dtype == "STRING":
            raise TypeError("torch has no string tensors: use as_numpy() or as_flat()")
        import torch
        return torch.from_numpy(self.as_numpy().copy())

    def as_flat(self) -> list:
        """The values as a flat Python list."""
        return self.as_numpy().reshape(-1).tolist()

    def __repr__(self):
        return "Output(%r, %s, %s)" % (self.name, self.dtype, self.shape)


class Outputs(list):
    """A run's outputs, in the model's order; also by name (outputs["y"])."""

    def __getitem__(self, i):
        if isinstance(i, str):
            for o in self:
                if o.name == i:
                    return o
            raise KeyError(i)
        return super().__getitem__(i)

    def as_numpy(self):
        """The only output as numpy (see Output.as_numpy)."""
        return self._one().as_numpy()

    def as_torch(self):
        return self._one().as_torch()

    def as_flat(self):
        return self._one().as_flat()

    def _one(self):
        if len(self) != 1:
            raise ValueError("the model has %d outputs: pick one (outputs[i] or outputs[name])" % len(self))
        return self[0]


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _pairs(reply) -> dict:
    """A RESP2 flat key/value list (or a RESP3 map) as a dict with str keys."""
    if isinstance(reply, dict):
        items = reply.items()
    else:
        items = zip(reply[0::2], reply[1::2])
    return {_text(k): v for k, v in items}


class Client:
    """A connection to an EnclaveAI server, or to each node of a cluster.

    Client(host, port, tls=False, attest=Policy(...)) connects and, before
    anything else is sent (AUTH and HELLO included: a password or a token
    goes only to a server whose evidence satisfied the policy), checks the
    server's AI.ATTEST evidence against the policy, bound to a fresh nonce
    and (with tls) to the TLS key of this very connection; that connection
    then carries every command, and one that redis-py opens again after a
    drop is attested again before it carries any.
    The default policy refuses simulated evidence: pass
    attest=Policy(allow_simulated=True) to accept it (development only,
    loudly), or attest=False to skip attestation altogether.

    Against a cluster (INFO cluster_enabled:1) each key's commands go to
    the node serving its slot, over a connection of its own that is
    attested the same way on first use; list_models asks every primary.
    The slot map (CLUSTER SLOTS) is read over those same connections.

    protocol=3 speaks RESP3 (HELLO 3), with any redis-py: 5 and later
    natively, older ones (Debian's 4.3.4) through enclaveai.resp3. Replies
    are read the same either way.

    Other keyword arguments go to redis.Redis (password, username,
    socket_timeout, ...)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, tls: bool = False,
                 attest: Union[Policy, bool, None] = None, cli: Optional[str] = None, protocol: int = 2, **kw):
        kw.setdefault("socket_timeout", 600)
        if tls:
            # The certificate is made inside the enclave: trust comes from
            # the evidence that binds its key, not from a CA.
            kw.update(ssl=True, ssl_cert_reqs=ssl.CERT_NONE, ssl_check_hostname=False)
        self._kw = kw
        self.tls = tls
        self._policy = None if attest is False else (attest if isinstance(attest, Policy) else Policy())
        self._cli = cli
        self.protocol = protocol
        self.attestation: Optional[Result] = None
        self.redis = self._open(host, port)
        # Cluster mode: each key's commands go to the node serving its
        # slot, over a connection of its own, attested like the first.
        self._nodes: Dict[Tuple[str, int], redis.Redis] = {(host, port): self.redis}
        self._slots: Optional[_Slots] = None
        if int(self.redis.info("cluster").get("cluster_enabled", 0)):
            self._slots = _Slots(self)
            self._slots.refresh()

    def close(self):
        for c in self._nodes.values():
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _at(self, host: str, port: int) -> redis.Redis:
        """The connection to one node (cluster mode), attested on first use."""
        c = self._nodes.get((host, port))
        if c is None:
            c = self._open(host, port)
            self._nodes[(host, port)] = c
        return c

    def _open(self, host: str, port: int) -> redis.Redis:
        """A connection to host:port (redis-py opens it at once), attested
        before its AUTH or HELLO, as every one it opens again later is."""
        kw = dict(self._kw)
        if self._policy is not None:
            kw["redis_connect_func"] = self._on_connect
        return _resp.client(self.protocol, host=host, port=port, **kw)

    def _for(self, key: str) -> redis.Redis:
        """The connection that serves key: the node owning its slot in
        cluster mode, else the one connection."""
        if self._slots is None:
            return self.redis
        node = self._slots.node(key)
        return self.redis if node is None else self._at(*node)

    def _redirect(self, err: redis.ResponseError) -> Optional[Tuple[str, redis.Redis]]:
        """For a cluster's redirection (MOVED, ASK, TRYAGAIN), what to do
        and where: MOVED means the slot map is stale (a slot moved since it
        was read), so it is read again. None for any other error."""
        if self._slots is None:
            return None
        # redis-py 6 and later raise these classes for every client, the
        # word taken off the text; 4.3 (Debian's) a plain ResponseError.
        if isinstance(err, exceptions.TryAgainError):
            word, addr = "TRYAGAIN", ""
        elif isinstance(err, (exceptions.MovedError, exceptions.AskError)):
            word = "MOVED" if isinstance(err, exceptions.MovedError) else "ASK"
            addr = "%s:%s" % (err.host, err.port)
        else:
            word, _, rest = str(err).partition(" ")
            if word not in ("MOVED", "ASK", "TRYAGAIN"):
                return None
            addr = rest.split()[1] if word != "TRYAGAIN" else ""
        if word == "TRYAGAIN":
            time.sleep(0.05)  # the slot is moving: the keys are, soon
            return word, None
        host, port = addr.rsplit(":", 1)
        if word == "MOVED":
            self._slots.refresh()
        return word, self._at(host, int(port))

    def _exec(self, key: str, *args):
        """Runs a command of key's on the node serving it, following the
        cluster's redirections a few times at most: a slot that moved broke
        every later call of a client that read the map once (cluster
        review)."""
        conn, asking = self._for(key), False
        for attempt in range(_REDIRECTS):
            try:
                if asking:  # each node's client has one connection: the command follows it there
                    conn.execute_command("ASKING")
                return conn.execute_command(*args)
            except redis.ResponseError as e:
                where = self._redirect(e)
                if where is None or attempt == _REDIRECTS - 1:
                    raise
                asking = where[0] == "ASK"
                conn = where[1] or self._for(key)

    # -- attestation -------------------------------------------------------

    def _on_connect(self, connection) -> None:
        """redis-py's redis_connect_func for every connection this client
        opens, the first and those redis-py opens again by itself after a
        drop (which went to whatever answered on that address, never
        checked: tools review, a model uploaded to another server): the
        evidence is checked on the bare connection, then redis-py's own
        on_connect sends AUTH and HELLO. The server answers AI.ATTEST before
        AUTH; before, the password went first, to a server not yet checked.
        A connection whose evidence fails is closed."""
        # The reply reader, which on_connect sets up again: nothing is
        # left unread in it by then.
        connection._parser.on_connect(connection)
        try:
            self.attestation = self._attest_on(connection)
        except BaseException:
            connection.disconnect()
            raise
        connection.on_connect()

    def _attest_on(self, connection) -> Result:
        nonce = secrets.token_bytes(32)
        # No health-check PING first (health_check_interval): before AUTH
        # the server answers it NOAUTH, as redis-py's own on_connect knows.
        connection.send_command("AI.ATTEST", nonce, check_health=False)
        reply = _pairs(connection.read_response())
        if self.tls:
            sock = connection._sock
            key = _attest.spki_from_cert(sock.getpeercert(binary_form=True))
        else:
            # Plain TCP: bound to the key the server reports, not to this
            # connection (a man in the middle could relay it).
            key = reply.get("tls_public_key") or b""
        return _attest.verify(reply["evidence"], nonce, key, self._policy, self._cli,
                              receipt_key=reply.get("receipt_public_key") or b"")

    # -- models ------------------------------------------------------------

    def chunk_size(self) -> int:
        """The server's MODEL_CHUNK_SIZE."""
        return int(self.redis.execute_command("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE"))

    def upload_model(self, model: Union[str, os.PathLike, bytes, bytearray, memoryview],
                     key: Optional[str] = None, name: Optional[str] = None, optimize: bool = True,
                     progress: bool = True, chunk_size: Optional[int] = None) -> Tuple[str, str]:
        """Stores an ONNX model from a path or bytes; returns (model id,
        sha256 hex). Without key the server names it with a new UUID (the
        id). name becomes the model's TAG. A file is streamed, a few MiB at a
        time, in chunks of the server's MODEL_CHUNK_SIZE: the client never
        holds two copies (nor, for a file, one). The server's digest is
        checked against the one computed while sending."""
        if isinstance(model, (str, os.PathLike)):
            f = open(model, "rb")
            size = os.fstat(f.fileno()).st_size
            label = os.path.basename(os.fspath(model))
        else:
            view = memoryview(model).cast("B")
            f, size, label = None, len(view), "model"
        try:
            chunk = chunk_size or self.chunk_size()
            n = max(1, -(-size // chunk))
            words = ["AI.MODELSTORE", key or "*", "ONNX", "CPU"]
            if name:
                words += ["TAG", name]
            words += ["OPTIMIZE", "1" if optimize else "0", "BLOB"]
            sha = hashlib.sha256()
            bar = _progress(size, label) if progress else None
            # Key * (the server names the model) goes to the node serving
            # "*"'s slot, which picks a name in one of its own slots.
            client, asking = self._for(key or "*"), False

            def packets():
                head = [b"*%d\r\n" % (len(words) + n)]
                for w in words:
                    w = w.encode()
                    head.append(b"$%d\r\n%s\r\n" % (len(w), w))
                yield b"".join(head)
                buf = bytearray(SEND_STEP) if f is not None else None
                pos = 0
                for _ in range(n):
                    end = min(size, pos + chunk)
                    yield b"$%d\r\n" % (end - pos)
                    while pos < end:
                        k = min(SEND_STEP, end - pos)
                        if f is not None:
                            part = memoryview(buf)[:k]
                            if f.readinto(part) != k:
                                raise IOError("the model file changed while it was sent")
                        else:
                            part = view[pos:pos + k]
                        sha.update(part)
                        yield part  # sent before the next read reuses buf
                        pos += k
                        if bar is not None:
                            bar.update(k)
                    yield b"\r\n"

            try:
                for attempt in range(_REDIRECTS):
                    conn = client.connection
                    if asking:
                        conn.send_command("ASKING")
                        conn.read_response()
                    conn.send_packed_command(packets())
                    try:
                        reply = conn.read_response()
                        break
                    except redis.ResponseError as e:
                        where = self._redirect(e)
                        if where is None or attempt == _REDIRECTS - 1:
                            raise
                        # Sent again from the start, to where it goes now.
                        asking, client = where[0] == "ASK", where[1] or self._for(key or "*")
                        sha = hashlib.sha256()
                        if f is not None:
                            f.seek(0)
                        if bar is not None:
                            bar.reset()
            finally:
                if bar is not None:
                    bar.close()
        finally:
            if f is not None:
                f.close()
        model_id = key if key else _text(reply)
        digest = sha.hexdigest()
        info = self.model_info(model_id)
        if info["sha256"] != digest:
            raise IOError("the server holds sha256 %s, the client sent %s" % (info["sha256"], digest))
        return model_id, digest

    def model_info(self, key: str) -> Dict[str, Any]:
        """AI.MODELINFO as a dict with str keys and values."""
        info = _pairs(self._exec(key, "AI.MODELINFO", key))
        out = {}
        for k, v in info.items():
            if k in ("inputs", "outputs"):
                v = [{_text(a): (_text(b) if not isinstance(b, list) else b) for a, b in _pairs(io_).items()}
                     for io_ in v]
            out[k] = _text(v)
        return out

    def list_models(self) -> List[Dict[str, str]]:
        """Every model this user may see: [{"key": ..., "tag": ...}] (of
        every primary node in cluster mode)."""
        conns = [self.redis] if self._slots is None else [self._at(*n) for n in self._slots.primaries()]
        return [{"key": _text(k), "tag": _text(t)} for c in conns for k, t in c.execute_command("AI._MODELSCAN")]

    def delete_model(self, key: str) -> None:
        """Deletes a model (AI.MODELDEL)."""
        key = self._resolve(key)
        self._exec(key, "AI.MODELDEL", key)

    def _resolve(self, key_or_sha: str) -> str:
        """A model key, given its key or its sha256 (64 hex digits)."""
        if len(key_or_sha) == 64 and all(c in "0123456789abcdef" for c in key_or_sha) \
                and not self._exec(key_or_sha, "EXISTS", key_or_sha):
            for m in self.list_models():
                if self.model_info(m["key"])["sha256"] == key_or_sha:
                    return m["key"]
            raise KeyError("no model with sha256 %s" % key_or_sha)
        return key_or_sha

    # -- runs --------------------------------------------------------------

    def run_model(self, key: str, inputs: Any, timeout_ms: Optional[int] = None) -> Outputs:
        """Runs a model (by key or sha256) on inputs: one array, a list of
        them in the model's input order, or a dict by input name; each a
        numpy array, a torch tensor or a (nested) list. Runs in one
        AI.DAGEXECUTE_RO round trip; nothing is left in the keyspace."""
        key = self._resolve(key)
        info = self.model_info(key)
        ins, outs = info["inputs"], info["outputs"]
        if isinstance(inputs, dict):
            arrays = [inputs[i["name"]] for i in ins]
        elif isinstance(inputs, (list, tuple)) and len(inputs) == len(ins) and \
                (len(ins) > 1 or _is_array(inputs[0])):
            arrays = list(inputs)  # one per input (a list of one array for a one-input model)
        else:
            arrays = [inputs]
        if len(arrays) != len(ins):
            raise ValueError("the model takes %d inputs, got %d" % (len(ins), len(arrays)))
        tag = uuid.uuid4().hex[:8]
        args: List[Any] = ["AI.DAGEXECUTE_RO", "ROUTING", key]
        if timeout_ms is not None:
            args += ["TIMEOUT", timeout_ms]
        in_names = ["in%d.%s" % (i, tag) for i in range(len(ins))]
        out_names = ["out%d.%s" % (i, tag) for i in range(len(outs))]
        for name, spec, a in zip(in_names, ins, arrays):
            dtype, shape, blob = _tensor(a, _text(spec.get("dtype")))
            args += ["|>", "AI.TENSORSET", name, dtype] + shape + ["BLOB", blob]
        args += ["|>", "AI.MODELEXECUTE", key, "INPUTS", len(ins)] + in_names + ["OUTPUTS", len(outs)] + out_names
        for name in out_names:
            args += ["|>", "AI.TENSORGET", name, "META", "BLOB"]
        reply = self._exec(key, *args)
        # A failed step is an error in its place, the steps after it NA:
        # the first error is the run's.
        for r in reply:
            if isinstance(r, Exception):
                raise r
        result = Outputs()
        for spec, r in zip(outs, reply[-len(outs):]):
            meta = _pairs(r)
            result.append(Output(spec["name"], _text(meta["dtype"]), [int(d) for d in meta["shape"]],
                                 meta["blob"]))
        return result


def _is_array(a) -> bool:
    """Whether a is an array (numpy, torch), not a nested list of numbers."""
    return isinstance(a, np.ndarray) or type(a).__module__.startswith("torch")


class _Slots:
    """A cluster's slot map (CLUSTER SLOTS), read over the client's own
    connections, each attested before its AUTH. (redis-py's RedisCluster,
    used for this before, opened connections of its own to every node and
    sent each its AUTH unattested.)"""

    def __init__(self, client: "Client"):
        self.client = client
        self.firsts: List[int] = []  # each range's first slot, in order
        self.ranges: List[Tuple[int, int, Tuple[str, int]]] = []  # (first, last, primary)

    def refresh(self) -> None:
        """Reads the map from the first node known that answers."""
        err: Optional[Exception] = None
        for host, port in list(self.client._nodes):
            try:
                reply = self.client._at(host, port).execute_command("CLUSTER", "SLOTS")
            except redis.ConnectionError as e:
                err = e
                continue
            # A primary's host may be "" or "?": the node asked, as redis-py reads it.
            self.ranges = sorted((int(r[0]), int(r[1]), (_text(r[2][0]) if _text(r[2][0]) not in ("", "?") else host,
                                                        int(r[2][1]))) for r in reply)
            self.firsts = [r[0] for r in self.ranges]
            return
        raise err or redis.ConnectionError("no cluster node answered CLUSTER SLOTS")

    def node(self, key) -> Optional[Tuple[str, int]]:
        """The primary serving key's slot; None if no node serves it."""
        slot = key_slot(key.encode() if isinstance(key, str) else key)
        i = bisect.bisect_right(self.firsts, slot) - 1
        if i >= 0 and self.ranges[i][1] >= slot:
            return self.ranges[i][2]
        return None

    def primaries(self) -> List[Tuple[str, int]]:
        """Every primary serving a slot, once each, in slot order."""
        return list(dict.fromkeys(r[2] for r in self.ranges))


def _tensor(a, dtype: Optional[str]) -> Tuple[str, List[int], bytes]:
    """An input as AI.TENSORSET's type, shape and BLOB. Strings (numpy's
    str, bytes and object arrays, or lists for a STRING input) become a
    STRING tensor: each element UTF-8 (bytes as they are), ended by a 0
    byte, so none may hold one."""
    if dtype == "STRING" or (isinstance(a, np.ndarray) and a.dtype.kind in "USO"):
        arr = np.asarray(a, dtype=object)
        parts = []
        for e in arr.reshape(-1):
            b = e.encode() if isinstance(e, str) else bytes(e) if isinstance(e, (bytes, bytearray, np.bytes_)) else None
            if b is None:
                raise TypeError("a STRING tensor holds str or bytes, not %s" % type(e).__name__)
            if b"\0" in b:
                raise ValueError("a STRING element may not hold a 0 byte")
            parts.append(b + b"\0")
        return "STRING", list(arr.shape), b"".join(parts)
    arr = _as_array(a, dtype)
    return _NP_TO_AI[arr.dtype], list(arr.shape), arr.tobytes()


def _as_array(a, dtype: Optional[str]) -> np.ndarray:
    """An input as a C-contiguous numpy array of a type the server knows;
    lists take the model's declared input type."""
    if hasattr(a, "detach") and hasattr(a, "numpy"):  # torch.Tensor
        a = a.detach().cpu().numpy()
    if isinstance(a, np.ndarray):
        arr = np.ascontiguousarray(a)
    else:
        arr = np.ascontiguousarray(np.asarray(a, dtype=DTYPES.get(dtype or "", np.float32)))
    if arr.dtype not in _NP_TO_AI:
        raise TypeError("numpy type %s has no server tensor type" % arr.dtype)
    return arr


def _progress(total: int, label: str):
    """A tqdm bar in bytes, or None where tqdm is missing."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="upload " + label)


def connect(addr: str = "127.0.0.1:6379", **kw) -> Client:
    """Client("host:port", ...): blindai's connect, for those coming from it."""
    host, _, port = addr.rpartition(":")
    return Client(host or "127.0.0.1", int(port), **kw)


__all__ = ["Client", "connect", "Output", "Outputs", "Policy", "Result", "AttestationError"]
