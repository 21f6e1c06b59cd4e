"""The dashboard's glue, one import for ``app.py`` and the tests: where scenarios come from (`sources`), the
settings form (`form`), runs and the load sweep (`runs`), the killable worker (`worker`), baseline against
what-if (`compare`) and what the numbers mean (`meaning`), the shareable what-if (`share`).

Nothing here imports Streamlit. Everything raises `TwinInputError` for bad input, with the field and the value.
"""

from __future__ import annotations

from twin.dashboard.compare import (CARD_ABSOLUTE_DELTA, HEADLINE_KEYS, HEADLINE_LABELS, comparison_rows,
                                    headline_cards, requests_csv, result_json)
from twin.dashboard.form import *  # noqa: F401,F403  (the form's constants and functions)
from twin.dashboard.form import _arrivals_mode, _apply_spec, _spec_defaults  # noqa: F401
from twin.dashboard.pd_form import POOLS_NOTE  # noqa: F401
from twin.dashboard.runs import (MAX_RUN_REQUESTS, SWEEP_KEYS, SWEEP_MULTIPLIERS, SWEEP_REQUESTS, RunOutput,
                                 check_size, expected_requests, headline, in_config_order, load_label, load_of, run_scenario,
                                 run_sweep_point, sweep_plan, with_load)
from twin.dashboard.sources import (DEFAULT_SCENARIO, UPLOAD_DIR_NAME, bundled_scenarios, default_start,
                                    load_bundled, profile_supported, save_upload, scenario_from_yaml,
                                    speculative_supported, start_points, trace_scenario, upload_dir)
from twin.scenario import BASELINE  # noqa: F401
