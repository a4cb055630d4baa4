"""A worker process that dies (OOM killer, segfault) fails its own task only; the run goes on."""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_a_worker_that_dies_fails_only_its_own_task(tiny_protocol, protocol_file):
    path = str(protocol_file(tiny_protocol(splits=(0, 1, 2), n=40)))
    # a fresh interpreter, so the pool's worker processes can import the crashing task function
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(HERE / "_crashing_task.py"), path], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert {k: v[0] for k, v in result.items()} == {"0": "done", "1": "failed", "2": "done"}
    assert "worker process died" in result["1"][1]
