"""A select's value that is not one of its options: from a shared link the message names the URL parameter the
user typed and the setting it seeds; from the scenario, the setting (as before)."""

from __future__ import annotations

import pytest

from twin.dashboard import share
from twin.errors import TwinInputError

pytest.importorskip("streamlit")    # the sidebar draws with Streamlit
from twin.dashboard.sidebar import SCHEDULERS, _index  # noqa: E402


def test_a_bad_url_choice_names_the_url_parameter_and_the_setting():
    err = share.choice_error("kv_dtype", "fp7", ["auto", "bf16", "fp8"], from_url=True)
    assert isinstance(err, TwinInputError)
    assert str(err) == "URL parameter w.kv_dtype='fp7': setting kv_dtype takes one of auto, bf16, fp8"


def test_a_bad_choice_from_the_scenario_names_the_setting():
    err = share.choice_error("scheduler", "fifo", ("continuous", "prefill_first", "static"), from_url=False)
    assert str(err) == "setting scheduler: 'fifo' is not one of continuous, prefill_first, static"


def test_the_sidebar_says_where_the_value_came_from():
    with pytest.raises(TwinInputError) as info:
        _index(SCHEDULERS, "fifo", "scheduler", {"scheduler": "fifo"})
    assert str(info.value) == ("URL parameter w.scheduler='fifo': setting scheduler takes one of continuous, "
                               "prefill_first, static")
    with pytest.raises(TwinInputError) as info:
        _index(SCHEDULERS, "fifo", "scheduler", {"max_num_seqs": 4})
    assert str(info.value) == "setting scheduler: 'fifo' is not one of continuous, prefill_first, static"
    assert _index(SCHEDULERS, "static", "scheduler", {"scheduler": "static"}) == 2
