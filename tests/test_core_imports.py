"""The serving core imports without the simulator's or the calibration engine's heavy dependencies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_core_imports_without_simpy_or_torch():
    code = (
        "import sys\n"
        "import twin.core.scheduler, twin.core.schedulers, twin.core.kv_cache_manager, twin.core.block_pool, twin.core.request\n"
        "import twin.core.scheduler_prefill_first, twin.core.scheduler_static, twin.core.request_queue\n"
        "bad = [m for m in ('simpy', 'torch') if m in sys.modules]\n"
        "print(','.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"heavy modules imported: {proc.stdout.strip()} {proc.stderr[-2000:]}"
