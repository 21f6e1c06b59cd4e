"""A validated reader of a ``fidelity_real.py --json`` held-out report: its folds (``report["folds"][kind]["folds"]``),
each fold's held-out group, fitted parameters, standard errors and per-case errors.

Issue 33, round 16: one reader for the scripts that read a report. A missing, empty, oversized, non-UTF-8 or non-JSON
file, a bad structure, an absent fold or a non-numeric value is one ``TwinInputError`` line naming the file.
Round 17: the per-case records of a ``--defaults-only --json`` report (``defaults_cases``), with the same checks.
Round 22 (33zB): a partial report (``complete: false``, written after each fold by an unfinished run:
``benchmarks/report_writer.py``) is refused in one line by every reader that pools or pairs a report's cases; only
``fold_params`` (one finished fold's parameters, final once the fold is written) reads one.
Round 23 (33zG): a held-out group given twice in one fold kind, or a case held out by two folds of one kind, is one
line; a per-case error must name a metric (``twin.fitting.targets.METRICS``) and be a signed relative error above
-1 (predicted / measured - 1 with a positive prediction) and at most ``MAX_RELATIVE_ERROR``; an integer beyond a
float's range is not a finite number (it was an ``OverflowError``); a pipe (``<(...)``) is read, a device or a
symbolic-link loop refused by the project's text reader; names in messages are cut to a readable length."""

from __future__ import annotations

from pathlib import Path

from twin.errors import TwinInputError
from twin.fitting.targets import METRICS
from twin.hardware.name_probe import quoted
from twin.json_input import parse_json
from twin.results.heldout_bands import cut, finite as finite_number
from twin.yaml_input import MAX_INPUT_BYTES, must_be_file, read_text

MAX_REPORT_BYTES = MAX_INPUT_BYTES      # 64 MiB; a full held-out report is ~0.15 MB, a --defaults-only one ~1 MB
# the largest signed relative error a report's case may carry: a prediction a billion times the measurement is no
# twin's (the largest in round 22's reports is +0.49); the bound keeps every sum and median of errors finite
MAX_RELATIVE_ERROR = 1e9
ERROR_METRICS = tuple(key for key, _ in METRICS)


def read_json_value(path: Path) -> object:
    """The JSON value in the file ``path``: the project's checks on a user's JSON (size at most
    ``MAX_REPORT_BYTES``, UTF-8 text, valid JSON, no key twice, bounded nesting)."""
    path = Path(path)
    must_be_file(path, shown=quoted)      # round 23: a too-long name was an OSError traceback
    return parse_json(read_text(path, "report", MAX_REPORT_BYTES), str(path))


def read_json(path: Path) -> dict:
    """The JSON object in the file ``path`` (``read_json_value``'s checks, then an object at the top)."""
    data = read_json_value(path)
    if not isinstance(data, dict):
        raise TwinInputError(f"{path}: a JSON {type(data).__name__}, not an object (a fidelity_real.py --json report)")
    return data


def restore_flags(fold: dict, params: dict[str, float]) -> dict[str, float]:
    """``params`` with the typed priors JSON cannot carry put back: a Blackwell link part the fold's plan reset to
    NCCL's exchange model (``twin.cost.unsharded_decode.EXCHANGE_PRIOR_LINK_S``, a ``ModelledLinkS``: the type is
    the flag that an exchange over n GPUs reads the model at n) is stored as a bare float, which the cost model then
    reads as a fixed 7.8 us at every TP. Put back where the plan says it reset the term and the value is the model's
    (round 22: a re-simulation from a report's ``params`` was 2.3 TPOT points off on MiniMax TP 4 B200 rows)."""
    from twin.cost.unsharded_decode import EXCHANGE_PRIOR_LINK_S, LINK_KEY
    plan = fold.get("plan") if isinstance(fold.get("plan"), list) else []
    out = dict(params)
    for name, value in params.items():
        reset = any(isinstance(line, str) and line.startswith(f"{name}: reset to its stated prior") for line in plan)
        if name.split("@", 1)[0] == LINK_KEY and reset and value == float(EXCHANGE_PRIOR_LINK_S):
            out[name] = EXCHANGE_PRIOR_LINK_S
    return out


class FoldReport:
    """The folds of one parsed report. ``data`` is the whole document (some scripts read its ``args`` or write
    it back); ``source`` names it in messages (the file's path)."""

    def __init__(self, data: object, source: object = "the report", partial_ok: bool = False) -> None:
        self.source = str(source)
        check_complete(data, self.source, partial_ok)
        folds = data.get("folds") if isinstance(data, dict) else None
        if not isinstance(folds, dict) or not folds:
            raise self.error("no folds (make it with fidelity_real.py --folds ... --json)")
        for kind, body in folds.items():
            if not isinstance(body, dict) or not isinstance(body.get("folds"), list):
                raise self.error(f"folds[{quoted(kind)}] has no list of folds")
            for i, fold in enumerate(body["folds"]):
                if not isinstance(fold, dict) or not isinstance(fold.get("held_out"), str):
                    raise self.error(f"{cut(kind)} fold {i} is not an object with a held_out name")
            self._check_distinct(kind, body["folds"])
        self.data = data

    def _check_distinct(self, kind: str, folds: list[dict]) -> None:
        """Each held-out group once in a fold kind, and each case held out by one fold of it (where ``errors`` is
        an object: its values are checked when read)."""
        held: dict[str, int] = {}
        cases: dict[str, str] = {}
        for i, fold in enumerate(folds):
            group = fold["held_out"]
            if group in held:
                raise self.error(f"{cut(kind)} folds {held[group]} and {i} both hold {quoted(group)} out "
                                 "(each group once per fold kind)")
            held[group] = i
            for name in fold.get("errors") if isinstance(fold.get("errors"), dict) else ():
                if name in cases:
                    raise self.error(f"case {quoted(name)} is held out by two {cut(kind)} folds "
                                     f"({quoted(cases[name])} and {quoted(group)}); a case is held out once per kind")
                cases[name] = group

    def error(self, what: str) -> TwinInputError:
        return TwinInputError(f"{self.source}: {what}")

    def silicon_every(self, default: int) -> int:
        """The ``--silicon-every`` the report was made with (its ``args``; ``default`` where it does not say), a
        whole number >= 1; else one line naming the file."""
        args = self.data.get("args", {})
        if not isinstance(args, dict):
            raise self.error(f"args is a JSON {type(args).__name__}, not an object (the options it was made with)")
        every = args.get("silicon_every", default)
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise self.error(f"args.silicon_every is {every!r}, not a whole number >= 1")
        return every

    def kinds(self) -> list[str]:
        """The fold kinds the report has (source, GPU, family: those it was made with)."""
        return list(self.data["folds"])

    def folds(self, kind: str) -> list[dict]:
        """The ``kind`` folds, in the report's order."""
        if kind not in self.data["folds"]:
            raise self.error(f"no {kind} folds (it has: {', '.join(self.kinds())})")
        return self.data["folds"][kind]["folds"]

    def fold(self, kind: str, group: str) -> dict:
        """The ``kind`` fold that holds ``group`` out."""
        folds = self.folds(kind)
        for fold in folds:
            if fold["held_out"] == group:
                return fold
        held = ", ".join(f["held_out"] for f in folds) or "none"
        raise self.error(f"no {kind} fold holds {quoted(group)} out (held out: {held})")

    def params(self, fold: dict) -> dict[str, float]:
        """A copy of ``fold``'s parameters: {name: finite number}, at least one (a fold's simulations ran at them;
        an empty object would run the cost model's bare defaults, silently)."""
        params = self._numbers(fold, fold.get("params"), "params")
        if not params:
            raise self.error(f"the fold holding {quoted(fold['held_out'])} out has no parameters (params is empty)")
        return restore_flags(fold, params)

    def std(self, fold: dict) -> dict[str, float | None]:
        """A copy of ``fold``'s standard errors: {name: finite number, or None where there is none}."""
        return self._numbers(fold, fold.get("std"), "std", none_ok=True)

    def identification(self, fold: dict) -> dict[str, str]:
        """A copy of how ``fold``'s fit identified each name ({} where the report does not say)."""
        status = self._mapping(fold, fold.get("identification", {}), "identification")
        if not all(isinstance(v, str) for v in status.values()):
            raise self.error(f"the fold holding {quoted(fold['held_out'])} out: an identification that is not a string")
        return dict(status)

    def errors(self, fold: dict, metrics: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
        """A copy of ``fold``'s per-case signed relative errors: {case name: {metric: finite number}}, each case with
        every metric ``metrics`` names (those its caller reads of every case); each metric one of
        ``ERROR_METRICS``, each error above -1 and at most ``MAX_RELATIVE_ERROR``."""
        cases = self._mapping(fold, fold.get("errors"), "errors")
        out = {name: self._numbers(fold, errs, f"errors of {quoted(name)}") for name, errs in cases.items()}
        for name, errs in out.items():
            where = f"the fold holding {quoted(fold['held_out'])} out: errors of {quoted(name)}"
            missing = [m for m in metrics if m not in errs]
            if missing:
                raise self.error(f"{where} have no {missing[0]}")
            for metric, value in errs.items():
                if metric not in ERROR_METRICS:
                    raise self.error(f"{where}: {quoted(metric)} is not a metric ({', '.join(ERROR_METRICS)})")
                if not -1.0 < value <= MAX_RELATIVE_ERROR:
                    raise self.error(f"{where}: {metric} is {value!r}, not a signed relative error in "
                                     f"(-1, {MAX_RELATIVE_ERROR:g}] (predicted / measured - 1)")
        return out

    def _mapping(self, fold: dict, values: object, what: str) -> dict:
        if not isinstance(values, dict) or not all(isinstance(name, str) for name in values):
            raise self.error(f"the fold holding {quoted(fold['held_out'])} out has no {what} object with names")
        return values

    def _numbers(self, fold: dict, values: object, what: str, none_ok: bool = False) -> dict:
        for name, value in self._mapping(fold, values, what).items():
            if not (finite_number(value) or (none_ok and value is None)):
                shown = quoted(value) if isinstance(value, str) else repr(value)
                shown = shown if len(shown) <= 80 else f"{shown[:40]}... ({len(shown):,} characters)"
                raise self.error(f"the fold holding {quoted(fold['held_out'])} out: {what} {quoted(name)} is "
                                 f"{shown}, not a finite number")
        return dict(values)


def check_complete(data: object, source: str, partial_ok: bool = False) -> None:
    """A report's ``complete`` key: absent (made before round 22: whole) or true; false (a partial report: the run
    stopped or is still running) only where ``partial_ok``; else one line naming ``source`` and the folds done."""
    if not isinstance(data, dict) or "complete" not in data:
        return
    complete = data["complete"]
    if not isinstance(complete, bool):
        raise TwinInputError(f"{source}: complete is {complete!r}, not true or false")
    if complete or partial_ok:
        return
    done = data.get("folds_done")
    names = "; ".join(f"{kind}: {', '.join(map(str, groups))}" for kind, groups in done.items()
                      if isinstance(groups, list)) if isinstance(done, dict) else ""
    raise TwinInputError(f"{source}: a partial report (fidelity_real.py had finished only the folds "
                         f"{names or 'none'}): let the run finish, or rerun it")


def load_report(path: Path, partial_ok: bool = False) -> FoldReport:
    """The validated report in ``path`` (a partial one only where ``partial_ok``: ``check_complete``)."""
    return FoldReport(read_json(path), path, partial_ok)


def fold_params(report: Path, kind: str, group: str) -> dict[str, float]:
    """The parameters of the ``kind`` fold holding ``group`` out in the report file ``report`` (a partial report
    too: a fold it holds is finished)."""
    rep = load_report(report, partial_ok=True)
    return rep.params(rep.fold(kind, group))


# a --defaults-only case record's row attributes (fidelity_real._case_record): text, counts, flags; each optional
CASE_TEXT = ("source", "gpu", "family", "model", "version", "system", "gemm_quant", "moe_quant")
CASE_COUNTS = ("conc", "tp", "isl", "osl", "ep", "dp")
CASE_FLAGS = ("client", "moe")
DEFAULTS_HINT = "(make it with fidelity_real.py --defaults-only --json)"


def check_case(case: object, where: str, need: tuple[str, ...] = (), metrics: tuple[str, ...] = ()) -> None:
    """A ``--defaults-only`` case record: a name; ``errors`` {metric: finite number}; ``measured`` and the scalars
    of ``predicted`` finite numbers >= 0 or null; every metric of ``errors`` a number in both ``measured`` and
    ``predicted`` (the error is made of the two) and each metric ``metrics`` names in ``errors``; row attributes
    (``CASE_TEXT``, ``CASE_COUNTS``, ``CASE_FLAGS``) text, whole numbers >= 0 and booleans (null allowed); each where
    present, and the keys ``need`` names present. A one-line error naming ``where`` and the field."""
    if not isinstance(case, dict) or not isinstance(case.get("name"), str):
        raise TwinInputError(f"{where}: not an object with a name {DEFAULTS_HINT}")
    where = f"{where} ({case['name']!r})"
    missing = [key for key in need if key not in case]
    if missing:
        raise TwinInputError(f"{where}: no {missing[0]} {DEFAULTS_HINT}")
    for section, scalars_only in (("errors", False), ("measured", False), ("predicted", True)):
        values = case.get(section, {})
        if not isinstance(values, dict):
            raise TwinInputError(f"{where}: {section} is not an object")
        for key, value in values.items():
            if scalars_only and isinstance(value, (dict, list)):
                continue            # predicted's slo_met / window: not read as numbers
            if not (finite_number(value) or (value is None and section != "errors")):
                raise TwinInputError(f"{where}: {section}.{key} is {value!r}, not a finite number")
            if section != "errors" and value is not None and value < 0:
                raise TwinInputError(f"{where}: {section}.{key} is {value!r}, not a number >= 0")
    check_metrics(case, where, metrics)
    for keys, ok, allowed in ((CASE_TEXT, lambda v: isinstance(v, str), "text"),
                              (CASE_COUNTS, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                               "a whole number >= 0"),
                              (CASE_FLAGS, lambda v: isinstance(v, bool), "true or false")):
        for key in keys:
            if case.get(key) is not None and not ok(case[key]):
                raise TwinInputError(f"{where}: {key} is {case[key]!r}, not {allowed}")


def check_metrics(case: dict, where: str, metrics: tuple[str, ...] = ()) -> None:
    """Every metric of a checked record's ``errors``, and each ``metrics`` names, in its ``errors`` and a number in
    both ``measured`` and ``predicted`` (the error is made of the two); else one line naming ``where``."""
    errors = case.get("errors", {})
    for key in (*errors, *(m for m in metrics if m not in errors)):
        if key not in errors:
            raise TwinInputError(f"{where}: no errors.{key} {DEFAULTS_HINT}")
        for section in ("measured", "predicted"):
            if not finite_number(case.get(section, {}).get(key)):
                raise TwinInputError(f"{where}: errors.{key} without a {section}.{key} {DEFAULTS_HINT}")


def defaults_cases(path: Path, need: tuple[str, ...] = (), row_need: tuple[str, ...] = (),
                   metrics: tuple[str, ...] = ()) -> list[dict]:
    """The case records of a ``fidelity_real.py --defaults-only --json`` report, each checked (``check_case``, with
    the keys ``need`` names required and the metrics ``metrics`` names in its errors, measured and predicted), their
    names unique; a missing or empty list is one line. A record of a server row (any source but the unscoped
    inference-perf runs) must also carry each key of ``row_need``, not null (the row attributes a script computes
    with)."""
    cases = read_json(path).get("cases")
    if not isinstance(cases, list) or not cases:
        raise TwinInputError(f"{path}: no list of cases {DEFAULTS_HINT}")
    seen: set[str] = set()
    for i, case in enumerate(cases):
        check_case(case, f"{path}: case {i}", need)
        if case.get("source") != "inference-perf":
            absent = [key for key in row_need if case.get(key) is None]
            if absent:
                raise TwinInputError(f"{path}: case {i} ({case['name']!r}): no {absent[0]} (a server row's "
                                     f"attribute) {DEFAULTS_HINT}")
        check_metrics(case, f"{path}: case {i} ({case['name']!r})", metrics)
        if case["name"] in seen:
            raise TwinInputError(f"{path}: case {i}: the name {case['name']!r} is given twice")
        seen.add(case["name"])
    return cases
