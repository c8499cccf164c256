"""The README's quick start, executed as written on a fresh checkout.

The checkout holds the files git tracks (and new ones it does not ignore)
copied from this working tree, nothing built; ONNX Runtime's cache
(.cache/onnxruntime) is copied in too, so that `make build` need not fetch
it again with npm. The quick start's first block is run in order, `make
run` in the background; each `$ ` command of the console block then runs in
bash in the checkout and its output is compared with the lines the README
shows under it, where `...` stands for any text (times, UUIDs). The only
change made is the port: 6380 becomes a free one.

    /usr/bin/python3 -m unittest redis_tests.test_readme -v
    /usr/bin/python3 redis_tests/test_readme.py --print   # the outputs, to paste
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import REPO, RawConn, free_port, poll  # noqa: E402

README_PORT = "6380"


def quick_start(text):
    """(setup commands, [(command, expected output lines)]) of the README."""
    section = text[text.index("## Quick start"):]
    section = section[:section.index("\n## ", 3)]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    setup = [re.sub(r"\s+#.*", "", l).strip() for l in blocks[0][1].splitlines() if l.strip()]
    steps = []
    for line in blocks[1][1].splitlines():
        if line.startswith("$ "):
            steps.append([line[2:], []])
        elif steps and not steps[-1][1] and steps[-1][0].count("'") % 2 == 1:
            steps[-1][0] += "\n" + line  # a quoted argument going on
        else:
            steps[-1][1].append(line)
    return setup, steps


def checkout(dest):
    """Copies the files git knows of (not ignored) and ORT's cache to dest."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.split(b"\0")
    for f in files:
        if f and os.path.isfile(os.path.join(REPO, f.decode())):
            dst = os.path.join(dest, f.decode())
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(REPO, f.decode()), dst)
    shutil.copytree(os.path.join(REPO, ".cache", "onnxruntime"), os.path.join(dest, ".cache", "onnxruntime"))


def matches(expected, got):
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


class Run:
    """The quick start running in a fresh checkout."""

    def __init__(self):
        with open(os.path.join(REPO, "README.md")) as f:
            self.setup, self.steps = quick_start(f.read())
        self.dir = tempfile.mkdtemp(prefix="enclaveai-readme-")
        self.port = str(free_port())
        self.server = None

    def sh(self, cmd, **kw):
        return subprocess.run(["bash", "-c", cmd.replace(README_PORT, self.port)], cwd=self.dir,
                              capture_output=True, text=True, **kw)

    def start(self):
        checkout(self.dir)
        build, serve = self.setup
        p = self.sh(build, timeout=900)
        if p.returncode != 0:
            raise AssertionError("%s failed:\n%s" % (build, (p.stdout + p.stderr)[-4000:]))
        self.server = subprocess.Popen(["bash", "-c", serve.replace(README_PORT, self.port)], cwd=self.dir,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

        def up():
            try:
                with RawConn(int(self.port), timeout=1) as c:
                    return c.cmd("PING") == "PONG"
            except OSError:
                if self.server.poll() is not None:
                    raise AssertionError("%s exited with %s" % (serve, self.server.returncode))
                return False
        poll(up, timeout=300, interval=0.2, what=serve)

    def stop(self):
        if self.server is not None:
            os.killpg(self.server.pid, signal.SIGTERM)
            self.server.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


class ReadmeTest(unittest.TestCase):

    def test_quick_start_runs_as_written(self):
        run = Run()
        self.addCleanup(run.stop)
        self.assertEqual(len(run.setup), 2, run.setup)
        self.assertGreaterEqual(len(run.steps), 6)
        run.start()
        for cmd, expected in run.steps:
            p = run.sh(cmd, timeout=300)
            self.assertEqual(p.returncode, 0, "%s\n%s" % (cmd, p.stdout + p.stderr))
            got = p.stdout.rstrip("\n").split("\n") if p.stdout else []
            got = [g.replace(run.port, README_PORT) for g in got]
            ok = len(got) == len(expected) and all(matches(e, g) for e, g in zip(expected, got))
            self.assertTrue(ok, "$ %s\nREADME shows:\n%s\ngot:\n%s" % (cmd, "\n".join(expected), "\n".join(got)))


if __name__ == "__main__":
    if sys.argv[1:] == ["--print"]:
        r = Run()
        try:
            r.start()
            for cmd, _ in r.steps:
                p = r.sh(cmd, timeout=300)
                print("$ " + cmd)
                print(p.stdout.replace(r.port, README_PORT), end="")
                if p.returncode:
                    print("(exit %d) %s" % (p.returncode, p.stderr))
        finally:
            r.stop()
    else:
        unittest.main()
