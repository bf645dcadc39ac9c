"""Starts the single-node Slurm of tests/health_slurm/slurm_cluster.py for a test
program that is not Python (src/jobs/slurm_backend_integration_test.cc).

Protocol on stdout, one line each:
  READY <path of slurm.conf>     once the node is IDLE
  ERROR <message>                when it could not start (missing package, not root, ...)
Then it waits until its stdin reaches end of file (the test closed the pipe or
died) or it gets SIGTERM/SIGINT, and stops every daemon it started, so a
crashed test never leaves slurmctld behind.
"""

import os
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Keep the source tree free of __pycache__ (the tests run from it).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "health_slurm"))

import slurm_cluster  # noqa: E402


def main():
    def stop_on_signal(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    cluster = None
    try:
        cluster = slurm_cluster.SlurmCluster()
        cluster.start()
    except (slurm_cluster.ToolMissing, RuntimeError, OSError) as e:
        if cluster is not None:
            cluster.stop()
        # One line: the reader takes the first line after ERROR as the message.
        print("ERROR " + str(e).replace("\n", " | "), flush=True)
        return 2
    try:
        print("READY " + cluster.conf, flush=True)
        # Blocks until the parent closes the pipe (or dies).
        sys.stdin.read()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
