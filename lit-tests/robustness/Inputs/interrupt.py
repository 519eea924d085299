# Usage: interrupt.py SIGNAL COMMAND... (robustness/ptxas-signals.test)
# Runs COMMAND (a build whose --ptxas is Inputs/slow-ptxas) with $TMPDIR private, waits until that
# ptxas has started, sends SIGNAL (TERM or INT) to the build, then prints the build's exit status
# as a shell reports it, whether the ptxas still runs, and what is left in $TMPDIR.
import glob
import os
import signal
import subprocess
import sys
import time

sig = getattr(signal, "SIG" + sys.argv[1])
# A shell may have started us with SIGINT ignored, and an ignored signal is inherited: give the
# build the default disposition, as an interactive shell would.
build = subprocess.Popen(sys.argv[2:], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
ptxas = None
deadline = time.monotonic() + 30
while ptxas is None:
    if time.monotonic() > deadline:
        build.kill()
        sys.exit("ptxas did not start")
    for log in glob.glob(os.path.join(os.environ["TMPDIR"], "truenoc-*", "*.log")):
        with open(log) as f:
            for line in f:
                if line.startswith("started "):
                    ptxas = int(line.split()[1])
    time.sleep(0.05)
build.send_signal(sig)
code = build.wait()
print("exit status", 128 - code if code < 0 else code)
try:
    os.kill(ptxas, 0)
    print("ptxas still runs")
except ProcessLookupError:
    print("ptxas is gone")
print("left in TMPDIR: [%s]" % " ".join(sorted(os.listdir(os.environ["TMPDIR"]))))
