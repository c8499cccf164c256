#!/usr/bin/python3
"""The kill -9 harness of the append-only log (make crash-test).

Concurrent clients write tensors, upload models (some in many BLOB chunks,
some large enough for the upload buffer, one large enough to be sealed into
its model file as it arrives), delete keys and set expiries,
while the server is killed with SIGKILL at a random moment. The server is
then started again on the same directory with the same flags (no help: no
flag to skip a bad log), and a checker verifies that every write
acknowledged before the kill is there with the right bytes, that a write
in flight at the kill is either wholly there or not at all (no half-uploaded
model: the bytes read back are one of the models sent), that deleted keys
stay deleted and expiries hold. Each client owns its keys, so the expected
state of a key is the sequence of that client's acknowledged writes.

    /usr/bin/python3 redis_tests/crash.py --rounds 50 --appendfsync everysec
    /usr/bin/python3 redis_tests/crash.py --rounds 50 --appendfsync always
"""

import argparse
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CRASH_PATTERNS, free_port, poll, server_binary  # noqa: E402

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
MODEL_FILES = ["linear.onnx", "mlp.onnx", "cnn.onnx", "add_int.onnx"]

ABSENT = ("absent",)


def read(name):
    with open(os.path.join(MODELS, name), "rb") as f:
        return f.read()


class Key:
    """What the checker knows of one key: its acknowledged state and, if a
    write was in flight at the kill, that write's state (either may be found)."""

    def __init__(self):
        self.state = ABSENT      # ("tensor", bytes) | ("model", sha256 hex) | ABSENT
        self.expire_at = 0       # unix ms, 0 = none
        self.inflight = None     # (state, expire_at) of an unacknowledged write


class Worker(threading.Thread):
    def __init__(self, n, port, keys, models, rng, stop):
        super().__init__(daemon=True)
        self.n, self.port, self.keys, self.models, self.rng, self.stop = n, port, keys, models, rng, stop
        self.acked = 0
        self.error = None

    def run(self):
        try:
            r = redis.Redis(port=self.port, socket_timeout=30)
            while not self.stop.is_set():
                op = self.rng.random()
                # Tensors and models have keys of their own (a TENSORSET on a
                # model key is WRONGTYPE).
                kind = "t" if op < 0.45 or (op >= 0.65 and self.rng.random() < 0.5) else "m"
                name = "c%d:%s%d" % (self.n, kind, self.rng.randrange(6))
                k = self.keys[name]
                if op < 0.45:
                    data = os.urandom(self.rng.choice([4, 64, 4096, 65536]))
                    new = (("tensor", data), 0)
                    call = ("AI.TENSORSET", name, "UINT8", len(data), "BLOB", data)
                elif op < 0.65:
                    blob = self.rng.choice(self.models)
                    size = self.rng.choice([len(blob), 1 << 20, 4096, 333])
                    chunks = [blob[i:i + size] for i in range(0, len(blob), size)]
                    new = (("model", hashlib.sha256(blob).hexdigest()), 0)
                    call = ("AI.MODELSTORE", name, "ONNX", "CPU", "BLOB", *chunks)
                elif op < 0.8:
                    new = (ABSENT, 0)
                    call = ("DEL", name)
                elif op < 0.9:
                    if k.state == ABSENT:
                        continue
                    at = int(time.time() * 1000) + self.rng.choice([300, 3600_000])
                    new = (k.state, at)
                    call = ("PEXPIREAT", name, at)
                else:
                    if k.state == ABSENT:
                        continue
                    new = (k.state, 0)
                    call = ("PERSIST", name)
                k.inflight = new
                try:
                    reply = r.execute_command(*call)
                except (redis.ConnectionError, redis.TimeoutError, ConnectionResetError):
                    return  # killed: the write stays in flight
                if call[0] in ("AI.TENSORSET", "AI.MODELSTORE") and reply not in (b"OK", "OK"):
                    raise AssertionError("%s: %r" % (call[0], reply))
                if call[0] in ("PEXPIREAT", "PERSIST") and reply == 0:
                    # The key was gone (a short TTL ran out) or had no TTL.
                    gone = k.expire_at and k.expire_at <= time.time() * 1000 + 50
                    new = (ABSENT, 0) if gone or call[0] == "PEXPIREAT" else (k.state, 0)
                k.state, k.expire_at = new
                k.inflight = None
                self.acked += 1
        except Exception as e:  # noqa: BLE001 - reported by the harness
            self.error = e


def observe(r, name):
    """The key's state on the server. A key with a short TTL can expire
    between TYPE and the read of its value: the read's error then counts
    only if TYPE, asked again, still finds the key."""
    t = r.type(name)
    if t in (b"none", "none"):
        return ABSENT
    try:
        if t in (b"AI_TENSOR", "AI_TENSOR"):
            return ("tensor", r.execute_command("AI.TENSORGET", name, "BLOB"))
        blob = r.execute_command("AI.MODELGET", name, "BLOB")
    except redis.ResponseError:
        if r.type(name) in (b"none", "none"):
            return ABSENT
        raise
    if isinstance(blob, list):
        blob = b"".join(blob)
    return ("model", hashlib.sha256(blob).hexdigest())


def check(r, keys, now_ms):
    """Verifies the server against what was acknowledged; the state found
    becomes the new acknowledged state. Returns the number of keys checked."""
    for name, k in keys.items():
        got = observe(r, name)
        allowed = [(k.state, k.expire_at)]
        if k.inflight is not None:
            allowed.append(k.inflight)
        ok = False
        for state, at in allowed:
            want = state
            if at and at <= now_ms:
                want = ABSENT  # expired (or about to be)
            if got == want or (got == ABSENT and at and at <= now_ms + 2000):
                ok = True
                break
        if not ok:
            raise AssertionError("key %s: found %s, acknowledged %s (in flight %s)"
                                 % (name, desc(got), desc(k.state), desc(k.inflight and k.inflight[0])))
        k.state, k.inflight = got, None
        if got != ABSENT:
            pttl = r.pttl(name)
            k.expire_at = now_ms + pttl if pttl > 0 else 0
        else:
            k.expire_at = 0
    return len(keys)


def desc(state):
    if state is None:
        return "nothing"
    if state == ABSENT:
        return "absent"
    kind, v = state
    if kind == "tensor":
        return "tensor of %d bytes %s" % (len(v), hashlib.sha256(v).hexdigest()[:12])
    return "model %s" % v[:12]


class Proc:
    def __init__(self, path, flags):
        self.path, self.flags = path, flags
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        self.port = free_port()
        self.err = os.path.join(self.path, "server-%d.stderr" % self.starts)
        with open(self.err, "wb") as f:
            self.proc = subprocess.Popen(
                [server_binary(), "--port", str(self.port), "--dir", self.path, "--save", ""] + self.flags,
                cwd=self.path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("server exited with %s at start:\n%s" % (self.proc.returncode, self.log()))
            try:
                return redis.Redis(port=self.port, socket_timeout=2).dbsize() is not None
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                return False
        poll(ready, timeout=60, what="the server to start")
        return redis.Redis(port=self.port, socket_timeout=30)

    def log(self):
        with open(self.err, "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        if CRASH_PATTERNS.search(self.log()):
            raise AssertionError("crash text on stderr:\n" + self.log()[-4000:])


def run(rounds, fsync="everysec", clients=4, seed=None, min_s=0.2, max_s=1.5, out=None, extra=()):
    """Runs the harness; returns a summary dict. Raises AssertionError on a loss."""
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    path = tempfile.mkdtemp(prefix="enclaveai-crash-")
    p = Proc(path, ["--appendfsync", fsync] + list(extra))
    models = [read(m) for m in MODEL_FILES]
    # One over 4 MiB: its upload buffer seals it into its model file as it
    # arrives (a file named by a random id, the OK before its SHA-256).
    sys.path.insert(0, MODELS)
    import huge_model
    models.append(bytes(huge_model.build(8 << 20).data))
    keys = {"c%d:%s%d" % (c, kind, i): Key() for c in range(clients) for kind in "tm" for i in range(6)}
    acked = checked = 0
    cut = 0
    try:
        for rnd in range(rounds):
            r = p.start()
            checked += check(r, keys, int(time.time() * 1000))
            if "torn record" in p.log():
                cut += 1
            r.close()
            stop = threading.Event()
            workers = [Worker(c, p.port, {n: k for n, k in keys.items() if n.startswith("c%d:" % c)},
                              models, random.Random(rng.random()), stop) for c in range(clients)]
            for w in workers:
                w.start()
            time.sleep(rng.uniform(min_s, max_s))
            p.kill9()
            stop.set()
            for w in workers:
                w.join(30)
                if w.error:
                    raise AssertionError("client %d: %r" % (w.n, w.error))
                acked += w.acked
            if out:
                print("round %d: %d writes acknowledged so far" % (rnd + 1, acked), file=out, flush=True)
        r = p.start()
        checked += check(r, keys, int(time.time() * 1000))
        r.close()
        p.kill9()
    except AssertionError as e:
        raise AssertionError("seed %d, dir %s: %s" % (seed, path, e)) from None
    shutil.rmtree(path, ignore_errors=True)
    return {"rounds": rounds, "fsync": fsync, "acknowledged": acked, "checked": checked,
            "starts": p.starts, "torn_tails_cut": cut, "seed": seed}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--appendfsync", default="everysec")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    t0 = time.monotonic()
    s = run(a.rounds, a.appendfsync, a.clients, a.seed, out=sys.stdout)
    print("OK: %(rounds)d kill -9 rounds, appendfsync %(fsync)s, %(acknowledged)d writes acknowledged, "
          "%(checked)d key checks, %(starts)d starts without help, %(torn_tails_cut)d torn tails cut, "
          "seed %(seed)d" % s + ", %.0f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
