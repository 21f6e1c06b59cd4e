"""Reading the vLLM silicon CSV (``measurements.csv``): one validated ``SiliconRow`` per line, or one
``TwinInputError`` line naming the file, the line, the field, the value and what is allowed."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from twin.errors import TwinInputError
from twin.yaml_input import not_a_file, read_text

CSV_NAME = "measurements.csv"
REQUIRED_COLUMNS = ("id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision",
                    "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size",
                    "attention_dp_size", "moe_tp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms")
SILICON_FOLDER = "vllm-silicon-h100-b200"
LLAMA_DEFAULT_VERSION = "0.10.2"     # blank backend_version on the Llama rows of 2025-10-29 (the README)
GPUS = {"h100_sxm": "H100-SXM", "b200_sxm": "B200"}   # the rows' system -> the twin's GPU


@dataclass(frozen=True)
class SiliconRow:
    """One validated row. ``line``: its line in the file (the header is line 1)."""

    line: int
    id: str
    source: str                       # the provenance's first field (source file or db dump)
    measured: str | None              # YYYY-MM-DD, when the provenance says
    image: str | None                 # container image, when it says
    backend: str
    vllm_version: str | None          # as the row gives it (or inferred for the blank Llama rows)
    model_path: str
    system: str
    precision: str | None
    gemm_quant: str | None
    moe_quant: str | None
    mode: str
    isl: int
    osl: int
    concurrency: int                  # the client's (silicon_concurrency), else batch_size x attention DP
    batch_size: int
    tp: int
    pp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    ttft_ms: float
    tpot_ms: float

    @property
    def published_client(self) -> bool:
        """False for ``aic-auto-gap-analysis`` rows: no client or server flags published."""
        return "aic-auto-gap-analysis" not in self.source and "gap-analysis" not in self.source

    @property
    def month(self) -> str:
        return (self.measured or "")[:7]


def _fail(path: Path, line: int, field: str, value: object, allowed: str) -> TwinInputError:
    return TwinInputError(f"{path}: line {line}: {field} = {value!r}: {allowed}")


def _int(raw: dict, field: str, path: Path, line: int, *, required: bool = True, default: int = 1,
         minimum: int = 1) -> int:
    text = (raw.get(field) or "").strip()
    if not text:
        if required:
            raise _fail(path, line, field, text, "required, an integer >= %d" % minimum)
        return default
    try:
        v = float(text)
    except ValueError:
        raise _fail(path, line, field, text, f"must be an integer >= {minimum}") from None
    if not math.isfinite(v) or v != int(v) or v < minimum:
        raise _fail(path, line, field, text, f"must be an integer >= {minimum}")
    return int(v)


def _ms(raw: dict, field: str, path: Path, line: int) -> float:
    text = (raw.get(field) or "").strip()
    try:
        v = float(text)
    except ValueError:
        raise _fail(path, line, field, text, "must be a number of ms > 0") from None
    if not math.isfinite(v) or v <= 0:
        raise _fail(path, line, field, text, "must be a finite number of ms > 0")
    return v


def _provenance(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, part in enumerate(p.strip() for p in text.split(";")):
        if "=" in part:
            k, v = part.split("=", 1)
            out.setdefault(k.strip(), v.strip())
        elif part.startswith(("vllm/", "nvcr.io/")):
            out.setdefault("image", part)
        elif i == 0 and part:
            out.setdefault("source_file", part)
    return out


def _row(raw: dict, path: Path, line: int) -> SiliconRow:
    ident = (raw.get("id") or "").strip()
    if not ident:
        raise _fail(path, line, "id", raw.get("id"), "required")
    prov = _provenance(raw.get("silicon_data_source") or "")
    mode = (raw.get("mode") or "").strip()
    if mode not in ("agg", "disagg"):
        raise _fail(path, line, "mode", mode, "must be agg or disagg")
    agg = mode == "agg"
    batch = _int(raw, "batch_size", path, line, required=agg)
    dp = _int(raw, "attention_dp_size", path, line, required=False)
    conc_text = prov.get("silicon_concurrency")
    if conc_text is not None:
        if not conc_text.isdigit() or int(conc_text) < 1:
            raise _fail(path, line, "silicon_data_source.silicon_concurrency", conc_text, "must be an integer >= 1")
        conc = int(conc_text)
    else:
        conc = batch * dp
    measured = prov.get("measured")
    if measured is not None and not re.match(r"^\d{4}-\d{2}-\d{2}", measured):
        raise _fail(path, line, "silicon_data_source.measured", measured, "must be a date YYYY-MM-DD...")
    model = (raw.get("model_path") or "").strip()
    if not model:
        raise _fail(path, line, "model_path", raw.get("model_path"), "required (a Hugging Face model id)")
    version = (raw.get("backend_version") or "").strip() or None
    if version is None and model == "meta-llama/Llama-3.1-70B" and (measured or "").startswith("2025-10-29"):
        version = LLAMA_DEFAULT_VERSION
    source = prov.get("source_file", "")
    return SiliconRow(
        line=line, id=ident, source=source, measured=measured[:10] if measured else None, image=prov.get("image"),
        backend=(raw.get("backend") or "").strip(), vllm_version=version, model_path=model,
        system=(raw.get("system") or "").strip(), precision=(raw.get("precision") or "").strip() or None,
        gemm_quant=(raw.get("gemm_quant_mode") or "").strip() or None,
        moe_quant=(raw.get("moe_quant_mode") or "").strip() or None, mode=mode,
        isl=_int(raw, "isl", path, line, minimum=2), osl=_int(raw, "osl", path, line, minimum=2),
        concurrency=conc, batch_size=batch,
        tp=_int(raw, "tp_size", path, line, required=agg), pp=_int(raw, "pp_size", path, line, required=agg),
        attention_dp=dp, moe_tp=_int(raw, "moe_tp_size", path, line, required=False, minimum=0),
        moe_ep=_int(raw, "moe_ep_size", path, line, required=False, minimum=0),
        ttft_ms=_ms(raw, "silicon_ttft_ms", path, line), tpot_ms=_ms(raw, "silicon_tpot_ms", path, line))


def read_silicon(path: Path | None = None) -> list[SiliconRow]:
    """Every row of ``measurements.csv`` (``path``: the file or its folder), validated: a missing column, a
    non-numeric or out-of-range number, an unknown mode is one ``TwinInputError`` naming file, line and field."""
    if path is None:
        path = silicon_dir() / CSV_NAME
    path = Path(path)
    if path.is_dir():
        path = path / CSV_NAME
    if not path.is_file():
        raise TwinInputError(f"{path}: {not_a_file(path) or 'no such file'} (the silicon measurements; "
                             f"--ground-truth names their folder)")
    text = read_text(path, "silicon measurements file")   # size, encoding, NUL checked; not read whole past the limit
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise TwinInputError(f"{path}: line 1: missing column {missing[0]!r} (needs {', '.join(REQUIRED_COLUMNS)})")
    rows = [_row(raw, path, i) for i, raw in enumerate(reader, start=2)]
    if not rows:
        raise TwinInputError(f"{path}: no data rows")
    return rows


def silicon_dir(ground_truth: Path | None = None) -> Path:
    from twin.fitting.ground_truth import ground_truth_dir
    return (ground_truth or ground_truth_dir()) / SILICON_FOLDER


def model_family(model: str) -> str:
    """A model family for leave-one-family-out folds: llama (Llama-2/3, CodeLlama), mixtral, qwen3, minimax,
    kimi, gpt-oss; else the name itself."""
    key = model.lower()
    for fam, marks in (("llama", ("llama",)), ("mixtral", ("mixtral",)), ("qwen3", ("qwen3",)),
                       ("minimax", ("minimax",)), ("kimi", ("kimi",)), ("gpt-oss", ("gpt-oss", "gpt_oss"))):
        if any(m in key for m in marks):
            return fam
    return key
