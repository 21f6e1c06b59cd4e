"""An unknown GPU or model name on a terminal: the suggestion and where the catalogued names are, not all of them.

`twin.hardware.gpus.resolve_gpu`, `twin.hardware.model_catalog.resolve_model` and a price table's check
(`twin.plan.price_names`) refuse an unknown name with every catalogued name after the suggestion (``...; did you
mean 'H100-SXM' or 'H20'?; known: A100-40GB, A100-SXM-80GB, ...``): the dashboard shows that line whole, having no
`twin list` at hand. The CLI prints the same line with the list replaced by its count and the command that shows
it (``...; 25 GPUs catalogued: `twin list gpus```), wherever the refusal sits in a longer line (``grid
deployment.gpu=h10: gpu: unknown GPU 'h10'; ...``)."""

from __future__ import annotations

from twin.errors import counted

LABELS = ("known", "catalogued")    # the words the refusals put before the list


def on_terminal(message: str) -> str:
    """``message`` with each full list of catalogued GPU or model names replaced by ``N GPUs catalogued: `twin
    list gpus``` (models: ``twin list models``); a message without one comes back as given."""
    if not any(f"; {label}: " in message for label in LABELS):
        return message
    from twin.hardware.catalog import list_gpus, list_models

    for names, noun, command in (([g.name for g in list_gpus()], "GPU", "twin list gpus"),
                                 ([m.name for m in list_models()], "model", "twin list models")):
        listed = ", ".join(names)
        for label in LABELS:
            message = message.replace(f"; {label}: {listed}", f"; {counted(len(names), noun)} catalogued: "
                                                               f"`{command}`")
    return message


__all__ = ["on_terminal"]
