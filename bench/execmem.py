#!/usr/bin/env python3
"""Peak memory and time of one large MULTI/EXEC through the log.

    /usr/bin/python3 bench/execmem.py bin/enclaveai-server

Starts the server given (appendfsync no, no save rules) on a free port in a
temporary directory, sends 150 AI.TENSORSETs of 4 MB in one redis-py
pipeline (a transaction, as redis-py's pipelines are by default), and
prints how long EXEC took and the server's VmHWM. docs/DURABILITY.md
("Transactions and multi-key writes are atomic") quotes its figures.
"""
import redis, subprocess, sys, time, os, tempfile, shutil, socket
binary = sys.argv[1]
d = tempfile.mkdtemp()
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([binary, "--port", str(port), "--dir", d, "--appendfsync", "no", "--save", ""], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = redis.Redis(port=port)
for _ in range(100):
    try:
        r.ping(); break
    except Exception: time.sleep(0.1)
blob = os.urandom(4000000)
pl = r.pipeline(transaction=True)
for i in range(150):
    pl.execute_command("AI.TENSORSET", "t%d" % i, "UINT8", 4000000, "BLOB", blob)
t0 = time.time(); pl.execute(); dt = time.time() - t0
hwm = [l for l in open("/proc/%d/status" % p.pid) if l.startswith("VmHWM")][0].split()[1]
print(binary, "EXEC %.1f s" % dt, "VmHWM %d MB" % (int(hwm) // 1024))
p.kill(); p.wait(); shutil.rmtree(d)
