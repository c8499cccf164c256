"""Black-box tests of operability through redis-cli: INFO commandstats and
the AI section, SLOWLOG and MONITOR (with tensor and model bytes redacted),
MEMORY USAGE, LATENCY LATEST.

    make build models
    /usr/bin/python3 -m unittest redis_tests.test_observe -v
"""

import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import unittest

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from harness import Server, poll  # noqa: E402

LINEAR = os.path.join(HERE, "models", "linear.onnx")


class ObserveTest(unittest.TestCase):

    def setUp(self):
        self.srv = Server("--slowlog-log-slower-than", "0", "--slowlog-max-len", "5").start()
        self.addCleanup(self.srv.stop)

    def cli(self, *args, stdin=None):
        p = subprocess.run(["redis-cli", "-p", str(self.srv.port)] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=30, stdin=stdin)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def info(self, section):
        out = {}
        for line in self.cli("INFO", section).splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def test_commandstats(self):
        self.cli("TIME")
        self.cli("TIME")
        self.cli("EXISTS")  # wrong arity: rejected
        self.cli("AI.TENSORGET", "a", "VALUES")  # runs, fails: no such key
        self.cli("EXPIRE", "k", "abc")  # as Redis: a call that failed, not a rejected one
        self.cli("CLIENT", "NOSUCH")  # an unknown subcommand: rejected
        st = self.info("commandstats")
        self.assertRegex(st["cmdstat_expire"], r"^calls=1,usec=\d+,usec_per_call=[\d.]+,rejected_calls=0,failed_calls=1$")
        self.assertRegex(st["cmdstat_client"], r"rejected_calls=1,failed_calls=0$")
        self.assertRegex(st["cmdstat_time"], r"^calls=2,usec=\d+,usec_per_call=[\d.]+,rejected_calls=0,failed_calls=0$")
        self.assertIn("rejected_calls=1,", st["cmdstat_exists"])
        self.assertTrue(st["cmdstat_ai.tensorget"].endswith("failed_calls=1"), st["cmdstat_ai.tensorget"])
        self.assertNotIn("# Commandstats", self.cli("INFO"), "not a default section, as in Redis")
        self.assertIn("# Commandstats", self.cli("INFO", "all"))

    def test_total_commands_counts_what_ran(self):
        """total_commands_processed counts the commands that ran, as Redis
        (7.0.15: RESETSTAT, two refused, PING, then INFO shows 2): not an
        unknown command nor a wrong arity (operator review)."""
        r = self.srv.client()
        r.execute_command("CONFIG", "RESETSTAT")
        for args in (("NOSUCHCMD",), ("EXISTS",)):
            with self.assertRaises(redis.ResponseError):
                r.execute_command(*args)
        r.execute_command("PING")
        self.assertEqual(r.info("stats")["total_commands_processed"], 2)

    def test_a_transactions_commands_count_each(self):
        """The commands EXEC runs count in INFO commandstats and SLOWLOG as
        they would alone, and EXEC itself is in no SLOWLOG, as in Redis
        (operator review: only EXEC counted, and redis-py's pipelines are
        transactions)."""
        r = self.srv.client()
        r.execute_command("CONFIG", "RESETSTAT")
        r.execute_command("SLOWLOG", "RESET")
        p = r.pipeline(transaction=True)
        p.execute_command("PING")
        p.execute_command("ECHO", "in-a-tx")
        self.assertEqual(p.execute(), [True, b"in-a-tx"])
        st = self.info("commandstats")
        for name in ("ping", "echo", "exec", "multi"):
            self.assertTrue(st["cmdstat_" + name].startswith("calls=1,"), (name, st))
        args = [[a.decode() for a in e[3]] for e in r.execute_command("SLOWLOG", "GET", "10")]
        self.assertIn(["ECHO", "in-a-tx"], args)
        self.assertNotIn(["EXEC"], args)

    def test_ai_section_aggregates_model_counters(self):
        with open(LINEAR, "rb") as f:
            self.assertEqual(self.cli("-x", "AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", stdin=f).strip(), "OK")
        self.cli("AI.TENSORSET", "x", "FLOAT", 2, 4, "VALUES", 1, 2, 3, 4, 5, 6, 7, 8)
        for _ in range(3):
            self.cli("AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        ai = self.info("ai")
        self.assertEqual((ai["models"], ai["model_calls"], ai["model_samples"], ai["model_errors"]), ("1", "3", "6", "0"))
        self.assertEqual(ai["model_bytes"], str(os.path.getsize(LINEAR)))
        self.assertRegex(ai["model0"], r"^calls=3,errors=0,usec=\d+,usec_per_call=[\d.]+,samples=6,batchsize=0,bytes=\d+,key=lin$")

    def test_slowlog_redacts_payloads(self):
        self.cli("SLOWLOG", "RESET")
        self.cli("AI.TENSORSET", "secret", "FLOAT", 2, "VALUES", 3.25, 4.5)
        self.cli("AI.TENSORSET", "blob", "INT8", 4, "BLOB", "abcd")
        out = self.cli("SLOWLOG", "GET", 3)
        self.assertNotIn("3.25", out)
        self.assertNotIn("abcd", out)
        self.assertIn("(4 bytes redacted)", out)
        self.assertIn("(redacted)", out)  # VALUES 3.25 4.5, without the lengths that tell the values
        self.assertNotIn("(3 bytes redacted)", out)
        r = self.srv.client()
        entries = r.execute_command("SLOWLOG", "GET", "10")
        self.assertLessEqual(len(entries), 5, "slowlog-max-len")
        args = [[a.decode() for a in e[3]] for e in entries]
        self.assertIn(["AI.TENSORSET", "blob", "INT8", "4", "BLOB", "(4 bytes redacted)"], args)
        self.assertGreaterEqual(r.execute_command("SLOWLOG", "LEN"), 3)
        self.assertEqual(self.cli("SLOWLOG", "RESET").strip(), "OK")
        self.assertEqual(self.cli("SLOWLOG", "LEN").strip(), "1")  # the RESET itself is logged after it ran
        self.assertIn("ERR", self.cli("SLOWLOG", "NOPE"))

    def test_memory_usage(self):
        self.cli("AI.TENSORSET", "t", "FLOAT", 1000, "BLOB", "x" * 4000)
        with open(LINEAR, "rb") as f:
            self.cli("-x", "AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", stdin=f)
        t = int(self.cli("MEMORY", "USAGE", "t"))
        m = int(self.cli("MEMORY", "USAGE", "lin"))
        self.assertGreaterEqual(t, 4000)
        self.assertLess(t, 4400)
        self.assertGreaterEqual(m, os.path.getsize(LINEAR))
        self.assertEqual(self.cli("MEMORY", "USAGE", "nosuch").strip(), "")

    def test_monitor_redacts_payloads(self):
        mon = subprocess.Popen(["redis-cli", "-p", str(self.srv.port), "MONITOR"], stdout=subprocess.PIPE,
                               text=True, bufsize=1)
        self.addCleanup(mon.stdout.close)
        self.addCleanup(mon.wait, 10)
        self.addCleanup(mon.kill)
        self.assertEqual(mon.stdout.readline().strip(), "OK")
        poll(lambda: "cmd=monitor" in self.cli("CLIENT", "LIST"), what="the monitor")
        self.cli("AI.TENSORSET", "secret", "FLOAT", 2, "VALUES", 3.25, 4.5)
        self.cli("AI.TENSORSET", "b", "INT8", 4, "BLOB", "abcd")
        # A password set by CONFIG SET, as Redis 7 redacts it (README check).
        self.cli("CONFIG", "SET", "requirepass", "pw-xyzzy")
        self.cli("-a", "pw-xyzzy", "--no-auth-warning", "CONFIG", "SET", "requirepass", "")
        # HELLO's AUTH without a version before it (a syntax error, still
        # shown) was shown whole (review).
        self.cli("HELLO", "AUTH", "default", "pw-plugh")
        self.cli("ECHO", "done")
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in mon.stdout], daemon=True).start()
        got = []
        while not got or '"done"' not in got[-1]:
            try:
                got.append(lines.get(timeout=10))
            except queue.Empty:
                self.fail("no MONITOR line in 10 s; got %r" % got)
        text = "".join(got)
        self.assertRegex(text, r'\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] "AI\.TENSORSET" "secret" "FLOAT" "2" "VALUES" '
                               r'"\(redacted\)" "\(redacted\)"')
        self.assertIn('"AI.TENSORSET" "b" "INT8" "4" "BLOB" "(4 bytes redacted)"', text)
        # The payloads appear nowhere but in the timestamps, which may
        # hold "3.25" by chance (1796434303.257326 did): left out.
        args = re.sub(r"^\d+\.\d{6} ", "", text, flags=re.M)
        self.assertNotIn("3.25", args)
        self.assertNotIn("abcd", args)
        # Administrative commands are not shown, as in Redis 7.
        self.assertNotIn("xyzzy", text)
        self.assertNotIn("plugh", text)
        self.assertNotIn('"CONFIG"', text)
        self.assertIn('"ECHO" "done"', text)

    def test_monitor_follows_client_reply(self):
        """A monitor whose replies are off is sent neither MONITOR's OK nor
        any line until CLIENT REPLY ON, as in Redis 7.0.15."""
        mon = harness.RawConn(self.srv.port)
        self.addCleanup(mon.close)
        mon.send(mon.encode("CLIENT", "REPLY", "OFF") + mon.encode("MONITOR"))
        poll(lambda: "cmd=monitor" in self.cli("CLIENT", "LIST"), what="the monitor")
        self.cli("ECHO", "unseen")
        mon.send(mon.encode("CLIENT", "REPLY", "ON"))
        self.assertEqual(mon.read_reply(), "OK")
        self.cli("ECHO", "seen")
        line = mon.read_reply()
        while '"CLIENT" "LIST"' in line or '"CLIENT" "REPLY"' in line:
            line = mon.read_reply()
        self.assertRegex(line, r'^\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] "ECHO" "seen"$')

    def test_monitor_own_commands_follow_their_replies(self):
        """As in Redis, where both go to the monitor's output buffer in
        turn: a monitor's own command's line comes after its reply, never
        before it (CLIENT REPLY ON's OK came after its line at times)."""
        mon = harness.RawConn(self.srv.port)
        self.addCleanup(mon.close)
        self.assertEqual(mon.cmd("MONITOR"), "OK")
        for i in range(300):
            self.assertEqual(mon.cmd("ECHO", str(i)), str(i).encode())
            self.assertRegex(mon.read_reply(), r'^\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] "ECHO" "%d"$' % i)
        mon.send(b"".join(mon.encode("ECHO", "p%d" % i) for i in range(50)))
        for i in range(50):
            self.assertEqual(mon.read_reply(), b"p%d" % i)
            self.assertRegex(mon.read_reply(), r'"ECHO" "p%d"$' % i)
        mon.send(mon.encode("MULTI") + mon.encode("ECHO", "x") + mon.encode("EXEC"))
        got = [mon.read_reply() for _ in range(6)]
        got = [re.sub(r"^\d+\.\d{6} \[0 [0-9.:]+\] ", "", g) if isinstance(g, str) else g for g in got]
        # An EXEC's lines follow its whole reply.
        self.assertEqual(got, ["OK", '"MULTI"', "QUEUED", [b"x"], '"ECHO" "x"', '"EXEC"'])

    def test_reset_ends_monitor(self):
        """As Redis 7.0.15 (hunt): RESET leaves MONITOR mode; no monitor line
        follows its reply, not even its own."""
        c = harness.RawConn(self.srv.port)
        self.addCleanup(c.close)
        self.assertEqual(c.cmd("MONITOR"), "OK")
        self.assertIn(" flags=O ", self.cli("CLIENT", "LIST"))
        self.assertEqual(c.cmd("RESET"), "RESET")
        self.assertEqual(c.cmd("PING"), "PONG")
        self.cli("ECHO", "after")
        self.assertTrue(c.is_open(0.3))
        self.assertEqual(c.buf, b"")
        self.assertNotIn("flags=O", self.cli("CLIENT", "LIST"))

    def test_monitor_sees_queued_commands_when_exec_runs_them(self):
        """As redis-server 7.0.15: a command goes to the monitors once it
        has run; a queued one when EXEC runs it, a discarded one never, nor
        an unknown subcommand (review)."""
        mon = harness.RawConn(self.srv.port)
        self.addCleanup(mon.close)
        self.assertEqual(mon.cmd("MONITOR"), "OK")
        c = harness.RawConn(self.srv.port)
        self.addCleanup(c.close)
        for cmd in (("MULTI",), ("ECHO", "a"), ("EXEC",), ("MULTI",), ("ECHO", "b"), ("DISCARD",),
                    ("OBJECT", "FOO", "x"), ("ECHO", "end")):
            c.cmd(*cmd)
        got = []
        while not got or got[-1] != '"ECHO" "end"':
            got.append(re.sub(r"^\d+\.\d{6} \[0 [0-9.:]+\] ", "", mon.read_reply()))
        self.assertEqual(got, ['"MULTI"', '"ECHO" "a"', '"EXEC"', '"MULTI"', '"DISCARD"', '"ECHO" "end"'])

    def test_monitor_sees_the_first_command_after_its_ok(self):
        """A command sent once MONITOR's OK has arrived is seen: the OK left
        before the monitor was registered, and make test once missed the
        command that followed it."""
        c = harness.RawConn(self.srv.port)
        self.addCleanup(c.close)
        for i in range(150):
            mon = harness.RawConn(self.srv.port)
            try:
                self.assertEqual(mon.cmd("MONITOR"), "OK")
                c.cmd("ECHO", "first%d" % i)
                line = mon.read_reply()
                self.assertTrue(line.endswith('"ECHO" "first%d"' % i), (i, line))
            finally:
                mon.close()

    def test_monitors_come_and_go_under_load(self):
        """Monitors that disconnect or RESET while lines pour in never stop
        the server (review: one ending while its writer took the last line
        held the monitors' lock for good, within 150 iterations)."""
        stop = threading.Event()
        self.addCleanup(stop.set)

        def load():
            s = socket.create_connection(("127.0.0.1", self.srv.port))
            self.addCleanup(s.close)

            def drain():
                while not stop.is_set():
                    try:
                        if not s.recv(1 << 20):
                            return
                    except OSError:
                        return
            threading.Thread(target=drain, daemon=True).start()
            batch = harness.RawConn.encode("PING") * 200
            while not stop.is_set():
                try:
                    s.sendall(batch)
                except OSError:
                    return
        for _ in range(6):
            threading.Thread(target=load, daemon=True).start()
        for i in range(150):
            m = socket.create_connection(("127.0.0.1", self.srv.port))
            m.sendall(harness.RawConn.encode("MONITOR") + (harness.RawConn.encode("RESET") if i % 3 == 0 else b""))
            time.sleep(0.02)
            m.close()
            with harness.RawConn(self.srv.port, timeout=5) as w:
                self.assertEqual(w.cmd("MONITOR"), "OK", "iteration %d" % i)
                self.assertRegex(w.read_reply(), r"^\d+\.\d{6} \[0 ", "iteration %d: no line" % i)
        stop.set()
        self.srv.assert_serving()

    def test_monitor_outlives_the_idle_timeout(self):
        """As in Redis (hunt: redis-cli monitor was dropped), a monitor is
        never idle; a second MONITOR has no reply."""
        self.cli("CONFIG", "SET", "timeout", 1)
        self.addCleanup(self.cli, "CONFIG", "SET", "timeout", 0)
        mon = harness.RawConn(self.srv.port)
        self.addCleanup(mon.close)
        idle = harness.RawConn(self.srv.port)
        self.addCleanup(idle.close)
        self.assertEqual(idle.cmd("PING"), "PONG")
        self.assertEqual(mon.cmd("MONITOR"), "OK")
        mon.send(mon.encode("MONITOR"))
        self.assertEqual(idle.read_until_closed(), b"", "an idle client is closed")
        self.cli("ECHO", "still")
        line = mon.read_reply()
        self.assertRegex(line, r'"ECHO" "still"$')
        self.assertTrue(mon.is_open(0.3))
        self.assertEqual(mon.buf, b"")

    def test_latency_latest(self):
        self.assertEqual(self.cli("LATENCY", "LATEST").strip(), "")
        self.cli("CONFIG", "SET", "latency-monitor-threshold", 1)
        # A run of slow.onnx takes seconds: far over 1 ms.
        with open(os.path.join(HERE, "models", "slow.onnx"), "rb") as f:
            self.cli("-x", "AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB", stdin=f)
        self.cli("AI.TENSORSET", "x", "FLOAT", 1, 1, "VALUES", 1)
        self.cli("AI.MODELEXECUTE", "slow", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        r = self.srv.client()
        [[event, at, latest, longest]] = r.execute_command("LATENCY", "LATEST")
        self.assertEqual(event, b"command")
        self.assertGreaterEqual(longest, latest)
        self.assertGreaterEqual(latest, 1)
        self.assertEqual(r.execute_command("LATENCY", "RESET"), 1)
        self.assertEqual(r.execute_command("LATENCY", "LATEST"), [])


if __name__ == "__main__":
    unittest.main()


def scrape(port):
    """GET /metrics, parsed from the Prometheus text format: {name: {labels: value}},
    labels as the text between the braces ("" for none), and the # TYPE lines."""
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as resp:
        assert resp.status == 200, resp.status
        text = resp.read().decode()
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            head, value = line.rsplit(" ", 1)
            name, _, labels = head.partition("{")
            samples.setdefault(name, {})[labels.rstrip("}")] = float(value)
    return samples, types


class MetricsTest(unittest.TestCase):
    """The Prometheus endpoint (metrics-port), scraped and parsed."""

    def test_metrics(self):
        port = harness.free_port()
        srv = Server("--metrics-port", str(port)).start()
        self.addCleanup(srv.stop)
        r = srv.client()
        with open(LINEAR, "rb") as f:
            self.assertTrue(r.execute_command("AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", f.read()))
        r.execute_command("AI.TENSORSET", "x", "FLOAT", 2, 4, "VALUES", 1, 2, 3, 4, 5, 6, 7, 8)
        for _ in range(3):
            r.execute_command("AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        for _ in range(5):
            r.ping()
        m, types = scrape(port)
        self.assertEqual(m["enclaveai_connected_clients"][""], 1)
        self.assertGreaterEqual(m["enclaveai_total_commands_processed"][""], 10)
        # The key count, which INFO gives on its db0 line (operator review).
        self.assertEqual(m["enclaveai_db_keys"]['db="0"'], 3)  # lin, x, y
        self.assertEqual(m["enclaveai_db_expires"]['db="0"'], 0)
        self.assertEqual(types["enclaveai_total_commands_processed"], "counter")
        self.assertEqual(types["enclaveai_connected_clients"], "gauge")
        self.assertGreaterEqual(m["enclaveai_command_calls_total"]['cmd="ping"'], 5)
        self.assertEqual(m["enclaveai_command_calls_total"]['cmd="ai.modelexecute"'], 3)
        self.assertEqual(m["enclaveai_model_calls_total"]['key="lin"'], 3)
        self.assertEqual(m["enclaveai_model_samples_total"]['key="lin"'], 6)
        self.assertEqual(m["enclaveai_models"][""], 1)
        self.assertGreater(m["enclaveai_used_memory_rss"][""], 0)
        self.assertIn("go_goroutines", m)
        self.assertIn("process_resident_memory_bytes", m)
        # The endpoint is HTTP on loopback only, and serves nothing else.
        import urllib.error
        import urllib.request
        with self.assertRaises(urllib.error.HTTPError):
            urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10)

    def test_no_model_keys_with_authentication(self):
        port = harness.free_port()
        srv = Server("--metrics-port", str(port), password="pw").start()
        self.addCleanup(srv.stop)
        r = srv.client()
        with open(LINEAR, "rb") as f:
            self.assertTrue(r.execute_command("AI.MODELSTORE", "tenant-secret-name", "ONNX", "CPU", "BLOB", f.read()))
        m, _ = scrape(port)
        self.assertNotIn("enclaveai_model_calls_total", m)
        self.assertEqual(m["enclaveai_models"][""], 1)
        self.assertFalse(any("tenant-secret-name" in labels for series in m.values() for labels in series))


class UploadProgressTest(unittest.TestCase):
    """log-progress-bytes: a large upload logs its progress, never its bytes."""

    def test_progress_lines(self):
        srv = Server("--log-progress-bytes", "1mb").start()
        self.addCleanup(srv.stop)
        r = srv.client()
        marker = b"NOT-A-MODEL-" * 1000
        chunk = (marker * 170)[:2_000_000]
        with self.assertRaises(Exception):
            r.execute_command("AI.MODELSTORE", "big", "ONNX", "CPU", "BLOB", chunk, chunk, chunk[:1_000_000])
        self.assertTrue(r.ping())
        log = poll(lambda: srv.stderr() if 'msg="upload received"' in srv.stderr() else None, what="the received line")
        progress = [l for l in log.splitlines() if 'msg="upload progress"' in l]
        # Once past each MiB of the 5,000,000 bytes, at most one line per
        # stretch the reader hands over (which may pass two).
        self.assertTrue(3 <= len(progress) <= 4, progress)
        self.assertRegex(progress[0], r"key=big bytes=\d+ announced=\d+ seconds=[\d.]+ mb_per_s=[\d.]+")
        sizes = [int(l.split(" bytes=")[1].split()[0]) for l in progress]
        self.assertEqual(sizes, sorted(sizes))
        self.assertGreaterEqual(sizes[0], 1 << 20)
        self.assertRegex(log, r'msg="upload received" client=\d+ addr=\S+ key=big bytes=5000000 announced=5000000')
        # Once per upload: the commands that follow on the connection log nothing.
        for _ in range(3):
            r.ping()
        self.assertEqual(srv.stderr().count('msg="upload received"'), 1, srv.stderr())
        self.assertNotIn("NOT-A-MODEL", log)
        # A snapshot of it all logs its progress too.
        r.execute_command("AI.TENSORSET", "t", "INT8", 3_000_000, "BLOB", os.urandom(3_000_000))  # incompressible
        self.assertTrue(r.save())
        saving = [l for l in srv.stderr().splitlines() if 'msg="saving snapshot"' in l]
        self.assertTrue(1 <= len(saving) <= 3, saving)
        self.assertRegex(saving[0], r"written_bytes=\d+ seconds=[\d.]+ mb_per_s=[\d.]+")
        # Below the threshold: nothing.
        small = Server("--log-progress-bytes", "64mb").start()
        self.addCleanup(small.stop)
        with self.assertRaises(Exception):
            small.client().execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", chunk)
        self.assertNotIn("upload", small.stderr())
