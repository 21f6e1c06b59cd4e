"""Test-wide settings."""

import os

from hypothesis import settings

# Property tests explore a fixed, reproducible set of examples (the same on every machine and in CI);
# TWIN_HYPOTHESIS_RANDOM=1 explores new ones.
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("TWIN_HYPOTHESIS_RANDOM") else "reproducible")
