"""The what-if as something to share: URL query parameters that rebuild the page, and a scenario YAML.

The URL holds where the what-if starts (``scenario``, ``start``, ``seed``) and only the explicit changes, one
``w.<setting>=<value>`` each; opening it gives the same sidebar and the same runs. Values are typed by the
setting's default (a flag, a whole number, a number or a name); one that does not parse is an error naming it.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import yaml

from twin.errors import TwinInputError

CHANGE_PREFIX = "w."


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def encode(scenario: str, start: str, seed: int, changes: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters for a what-if (``changes``: setting key -> value, the explicit changes only)."""
    out = {"scenario": scenario, "start": start, "seed": str(int(seed))}
    out.update({CHANGE_PREFIX + key: _text(value) for key, value in sorted(changes.items())})
    return out


# the sidebar's widgets refuse values outside their ranges with an exception, not a message (twin.dashboard.sidebar
# gives each its bounds); a URL value must fit the widget it seeds. None fits only the settings that may be empty.
JS_MAX_INT = (1 << 53) - 1      # the largest whole number a browser's number widget holds exactly
WIDGET_RANGES = {**{k: (1, JS_MAX_INT) for k in ("tensor_parallel_size", "replicas", "max_num_seqs",
                                                "max_num_batched_tokens", "block_size", "concurrency", "num_requests")},
                 "gpu_memory_utilization": (-math.inf, 1.0), "spec.num_speculative_tokens": (1, 32),
                 "spec.acceptance_rate": (0.0, 1.0)}
EMPTY_ALLOWED = ("spec.acceptance_rate", "duration_s")


def _widget_range(key: str) -> tuple[float, float]:
    if key.startswith("classes."):      # a class's typical token counts
        return 0, JS_MAX_INT
    return WIDGET_RANGES.get(key, (-math.inf, math.inf))


def parse_value(key: str, text: str, default: Any) -> Any:
    """``text`` typed like ``default``; a TwinInputError naming the URL parameter when it does not fit (a number
    outside the range of the setting's widget included)."""
    where = f"URL parameter {CHANGE_PREFIX}{key}={text!r}"
    if text.lower() == "none" and not isinstance(default, bool) and (default is None or key in EMPTY_ALLOWED):
        return None
    value = _typed(where, text, default)
    lo, hi = _widget_range(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not lo <= value <= hi:
        bound = f"at most {_shown(hi)}" if lo == -math.inf else f"in [{_shown(lo)}, {_shown(hi)}]"
        raise TwinInputError(f"{where}: the setting's widget takes values {bound}")
    return value


def _shown(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def _typed(where: str, text: str, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if isinstance(default, int) or (default is None and text.strip().lstrip("+-").isdigit()):
            return int(text)
        if isinstance(default, float) or default is None:
            v = float(text)
            if not math.isfinite(v):
                raise ValueError
            return v
    except ValueError:
        kind = "true or false" if isinstance(default, bool) else "a number"
        raise TwinInputError(f"{where}: expected {kind}") from None
    return text


def choice_error(key: str, value: Any, options: Sequence[Any], from_url: bool) -> TwinInputError:
    """A select's value that is not one of its options. From a shared link (``from_url``) the message names the
    URL parameter as the user typed it and the setting it seeds; from the scenario, the setting."""
    allowed = ", ".join(map(str, options))
    if from_url:
        return TwinInputError(f"URL parameter {CHANGE_PREFIX}{key}={_text(value)!r}: setting {key} takes one of "
                              f"{allowed}")
    return TwinInputError(f"setting {key}: {value!r} is not one of {allowed}")


def url_choice_warning(param: str, value: Any, options: Sequence[Any], shown: Any,
                       dropped: Sequence[str] = ()) -> str:
    """A shared link's select-like parameter (``scenario``, ``start``) that names none of its options (``value``
    None: missing): the page opens ``shown`` instead and says so in one line, naming the parameter, the value,
    the allowed values and the link's parameters it therefore leaves out (``dropped``: made for what the link
    named)."""
    allowed = ", ".join(map(str, options))
    given = (f"{param} is missing (one of {allowed})" if value is None
             else f"{param}={_text(value)!r}: not one of {allowed}")
    return f"URL parameter {given}; showing {shown}" + (f", without the link's {', '.join(dropped)}" if dropped
                                                         else "")


def link_params(params: Mapping[str, Any], leave: Sequence[str] = ()) -> list[str]:
    """A shared link's parameters the page reads (``URL_PARAMS`` and ``w.`` changes), less ``leave``."""
    return [k for k in params if k not in leave and (k in URL_PARAMS or str(k).startswith(CHANGE_PREFIX))]


URL_PARAMS = ("scenario", "start", "seed")
STREAMLIT_PARAMS = ("embed", "embed_options")   # Streamlit's own (an embedded page's look), not the what-if's


def unknown_params_warning(params: Mapping[str, Any]) -> str | None:
    """One line naming a shared link's parameters the page does not read (a typo such as ``strat=`` or a
    setting without its ``w.`` prefix would otherwise be dropped without a word); None when there are none."""
    unknown = [k for k in params if k not in URL_PARAMS + STREAMLIT_PARAMS and not str(k).startswith(CHANGE_PREFIX)]
    if not unknown:
        return None
    named = ", ".join(f"{k}={_text(params[k])!r}" for k in unknown)
    return (f"URL parameter{'s' if len(unknown) > 1 else ''} {named}: not read by this page (it reads "
            f"{', '.join(URL_PARAMS)} and {CHANGE_PREFIX}<setting>); left out")


def decode(params: Mapping[str, str], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The explicit changes a URL carries, typed by ``defaults``; a setting the page does not offer for this
    scenario is an error naming it."""
    changes: dict[str, Any] = {}
    for name, text in params.items():
        if not name.startswith(CHANGE_PREFIX):
            continue
        key = name[len(CHANGE_PREFIX):]
        if key not in defaults:
            raise TwinInputError(f"URL parameter {name}: not a setting of this scenario "
                                 f"(settings: {', '.join(sorted(defaults))})")
        changes[key] = parse_value(key, str(text), defaults[key])
    return changes


def scenario_yaml(raw: Mapping[str, Any], name: str | None = None) -> bytes:
    """The what-if as a scenario file `twin run` accepts (no variants: it is one configuration)."""
    data = {k: v for k, v in raw.items() if k != "variants"}
    if name:
        data["name"] = name
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")
