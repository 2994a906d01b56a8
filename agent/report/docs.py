"""The repository's docs that follow the latest results: a managed section with the recommended layout and launch
command (in README.md, or docs/training.md when there is no README), docs/training.md's guide to how the model is
trained here (the chosen layout and why, the commands, every layout's memory and throughput measured and predicted,
links to every report), and docs/MODEL_CARD.md.

The model card follows the Hugging Face convention (YAML metadata, then model details, training set-up and data,
evaluation, limitations). meshpilot owns only the part between its markers: metadata and anything a person adds
outside them stay as they are.
"""

from __future__ import annotations

import os
import re

from agent.replies import reasons_behind, trial_candidate
from agent.report.context import Context
from agent.report.figures import Page
from agent.report.markdown import split_cell, table, train_command, yes_no
from agent.report.prose import Slot, compose, render
from agent.report.sections import markers, replace_section

MODEL_CARD = "docs/MODEL_CARD.md"
TRAINING_GUIDE = "docs/training.md"
GUIDE_SECTION = "training-guide"
TRAINING_SECTION = "training"
MODEL_CARD_SECTION = "model-card"
_CARD_METADATA = "---\nlibrary_name: transformers\ntags:\n- meshpilot\n---\n\n# Model card\n\n"
_MODEL_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "vocab_size", "max_position_embeddings")  # fmt: skip


def docs_file(readme_exists: bool) -> str:
    return "README.md" if readme_exists else "docs/training.md"


def training_section(ctx: Context, document: str, existing: str | None) -> str:
    """`existing` (the committed file, or None) with the training section rewritten."""
    winner, page = ctx.sweep.winner, ctx.ledger.page(document)
    link = os.path.relpath(f"{ctx.report_dir}/README.md", os.path.dirname(document) or ".")
    config = ctx.run_file(winner, "config.yaml")
    get = ctx.sources.figure
    body = (
        "## Training with meshpilot\n\n"
        f"Recommended by the {ctx.sweep_name()} ({ctx.date}, [report]({link})): "
        f"{render(ctx.layout(winner), page)} on {page.show(ctx.metric(winner, 'world_size', unit='count'))} "
        f"{page.show(ctx.metric(winner, 'device_type', unit='text'))} processes, micro-batch "
        f"{page.show(get(config, 'train', 'micro_batch', unit='count'))} with "
        f"{page.show(ctx.metric(winner, 'grad_accum', unit='count'))} accumulation steps per rank: "
        f"{page.show(ctx.metric(winner, 'tokens_per_s', unit='rounded'))} tokens/s measured, "
        f"{page.show(ctx.memory(winner, 'measured', 'peak'))} MiB peak on the largest rank.\n\n"
        f"```bash\n{train_command(ctx, winner, page)}\n```\n\n"
        "This section is rewritten by `meshpilot report`; edit outside its markers."
    )
    return replace_section(existing, TRAINING_SECTION, body, document)


def training_guide(ctx: Context, existing: str | None) -> str:
    """docs/training.md with its guide rewritten from this sweep; the reports it linked before stay linked."""
    page = ctx.ledger.page(TRAINING_GUIDE)
    report = f"{ctx.report_dir}/README.md"
    reports = [link for link in _report_links(existing) if link[1] != _relative(report)]
    reports.append((f"{ctx.date} {ctx.slug}", _relative(report)))
    body = "\n\n".join([
        "## How this model is trained here",
        f"From the {ctx.sweep_name()} ({ctx.date}, [report]({_relative(report)})). Every number is read "
        f"from the result files copied beside that report; its `figures.json` names the file of each.",
        "### The chosen layout and why",
        _why_chosen(ctx, page),
        "### Commands",
        _commands(ctx, page),
        "### Memory and throughput per layout, measured and predicted",
        _per_layout(ctx, page),
        "### Reports",
        "\n".join(f"- [{name}]({path})" for name, path in reports),
    ])  # fmt: skip
    return replace_section(existing, GUIDE_SECTION, body, TRAINING_GUIDE)


def _commands(ctx: Context, page: Page) -> str:
    command = train_command(ctx, ctx.sweep.winner, page)
    train = f"Train with the chosen layout:\n\n```bash\n{command}\n```\n\n" if command else ""
    return train + f"Measure the layouts again:\n\n```bash\nmeshpilot sweep {ctx.experiment}\n```"


def _why_chosen(ctx: Context, page: Page) -> str:
    """The winner's measured throughput beside the runner-up's, with the memory and communication behind them."""
    winner = ctx.sweep.winner
    ranked = [t for t in ctx.sweep.ranked() if t is not winner]

    def facts(trial) -> str:
        return (
            f"{page.show(ctx.metric(trial, 'tokens_per_s', unit='rounded'))} tokens/s measured, "
            f"{_peak_memory(ctx, trial, page)}, and "
            f"{page.show(ctx.communication(trial, 'total_bytes'))} MiB sent per rank per step in "
            f"{page.show(ctx.communication(trial, 'total_collectives', unit='count'))} collectives (predicted)"
        )

    text = f"{render(ctx.label(winner), page)} had the best {ctx.sweep.objective} of the trials that finished: " + (
        facts(winner) + "."
    )
    if ranked:
        runner_up = ranked[0]
        reasons = reasons_behind(trial_candidate(runner_up.record), trial_candidate(winner.record))
        why = f"; it has costs the winner has not: {'; '.join(reasons)}" if reasons else ""
        text += f" The runner-up, {render(ctx.label(runner_up), page)}: {facts(runner_up)}{why}."
    return text


def _peak_memory(ctx: Context, trial, page: Page) -> str:
    """The measured peak beside its prediction, like for like. On CUDA both are the device's (the allocator's
    reserved peak and what lives outside it). On CPU the measured peak is the process's resident set, interpreter
    and libraries included: it stands beside the predicted process peak (trainer.rank.loop.predicted_process_peak: the
    resident set measured before set-up plus the predicted tensors), both of the rank with the largest peak."""
    source = ctx.run_file(trial, "memory.json")
    measured, predicted = ctx.sources.value(source, "measured"), ctx.sources.value(source, "predicted")
    if not measured or not predicted or any("process_peak" not in rank for rank in predicted):
        return (
            f"a measured peak of {page.show(ctx.memory(trial, 'measured', 'peak'))} MiB per rank (predicted "
            f"{page.show(ctx.memory(trial, 'predicted', 'peak'))} MiB)"
        )
    rank = max(range(len(measured)), key=lambda r: measured[r]["peak"])

    def shown(side: str, category: str) -> str:
        return page.show(ctx.sources.figure(source, side, rank, category, unit="mib"))

    return (
        f"a measured peak of {shown('measured', 'peak')} MiB per rank, the process's resident set (predicted "
        f"{shown('predicted', 'process_peak')} MiB: the {shown('measured', 'setup_start')} MiB it held before "
        f"set-up plus {shown('predicted', 'peak')} MiB of tensors the memory model predicts)"
    )


def _per_layout(ctx: Context, page: Page) -> str:
    header = ["trial", "layout", "status", "tokens/s measured", "tokens/s predicted", "peak MiB measured",
              "peak MiB predicted"]  # fmt: skip
    rows = [
        [f"`{t.id}`", render(ctx.layout(t), page), t.status,
         page.show(ctx.record(t, "tokens_per_s", unit="rounded")),
         page.show(ctx.record(t, "predicted_tokens_per_s", unit="rounded")),
         page.show(ctx.record(t, "peak_mem_bytes", unit="mib", reduce="max")),
         page.show(ctx.record(t, "predicted_peak_bytes", unit="mib", reduce="max"))]
        for t in ctx.sweep.trials
    ]  # fmt: skip
    note = "\n\nPeak memory is the largest rank's."
    if ctx.sources.value(ctx.summary, "device_type") == "cpu":
        note += (
            " On CPU the measured peak is the process's resident set (interpreter and libraries included) and the "
            "predicted one the tensors alone; above, the winner's measured peak stands beside a predicted resident set."
        )
    return table(header, rows) + note


def _report_links(existing: str | None) -> list[tuple[str, str]]:
    """The (name, path) of every report the guide linked before."""
    begin, end = markers(GUIDE_SECTION)
    if not existing or begin not in existing or end not in existing:
        return []
    section = existing[existing.find(begin) : existing.find(end)]
    listed = section.split("### Reports", 1)[-1]
    return re.findall(r"^- \[([^\]]+)\]\(([^)]+)\)$", listed, flags=re.MULTILINE)


def _relative(path: str) -> str:
    """A repository path as docs/training.md links it."""
    return os.path.relpath(path, os.path.dirname(TRAINING_GUIDE))


def model_card(ctx: Context, existing: str | None) -> str:
    page = ctx.ledger.page(MODEL_CARD)
    body = "\n\n".join([_details(ctx, page), _training(ctx, page), _evaluation(ctx, page), _limitations(ctx, page)])
    if existing is None:
        return _CARD_METADATA + replace_section(None, MODEL_CARD_SECTION, body, MODEL_CARD)
    return replace_section(existing, MODEL_CARD_SECTION, body, MODEL_CARD)


def _details(ctx: Context, page: Page) -> str:
    winner = ctx.sweep.winner
    config, get = ctx.run_file(winner, "config.yaml"), ctx.sources.figure
    slot = Slot(
        "model",
        "A causal language model trained with meshpilot's built-in trainer. The layout and batch split below are "
        "the best that the {sweep} measured, and the figures come from its result files.",
        {"sweep": ctx.sweep_name()},
    )
    text, ctx.prose_origins["model"] = compose(slot, page, ctx.prose)
    lines = []
    if ctx.sources.value(config, "model", "path"):
        lines.append(f"- Weights and configuration from `{page.show(get(config, 'model', 'path', unit='text'))}`")
    else:
        lines.append(f"- Architecture: `{page.show(get(config, 'model', 'config', 'model_type', unit='text'))}`")
        for key in _MODEL_KEYS:
            if ctx.sources.value(config, "model", "config", key) is not None:
                lines.append(f"- {key}: {page.show(get(config, 'model', 'config', key, unit='count'))}")
    lines.append(f"- Tokenizer: `{page.show(get(config, 'tokenizer', unit='text'))}`")
    return "## Model details\n\n" + text + "\n\n" + "\n".join(lines)


def _training(ctx: Context, page: Page) -> str:
    winner = ctx.sweep.winner
    config = ctx.run_file(winner, "config.yaml")

    def show(*key: str | int, unit: str = "text") -> str:
        return page.show(ctx.sources.figure(config, *key, unit=unit))

    def metric(name: str, unit: str = "text") -> str:
        return page.show(ctx.metric(winner, name, unit=unit))

    data = ctx.sources.value(config, "data", "train")
    files = range(len(data)) if isinstance(data, list) else [None]
    data_text = ", ".join(f"`{show('data', 'train', *([] if i is None else [i]))}`" for i in files)
    report = os.path.relpath(f"{ctx.report_dir}/README.md", "docs")
    lines = [
        f"- Data: {data_text}; sequence length {show('data', 'seq_len', unit='count')}, packing "
        f"{yes_no(ctx.sources.value(config, 'data', 'packing'))}",
        f"- Optimizer: {show('train', 'optimizer')}, learning rate {show('train', 'lr')}, "
        f"{show('train', 'lr_schedule')} schedule after {show('train', 'warmup_steps', unit='count')} warm-up "
        f"steps, weight decay {show('train', 'weight_decay')}",
        f"- Batch: {show('train', 'global_batch_tokens', unit='count')} tokens per optimizer step, micro-batch "
        f"{show('train', 'micro_batch', unit='count')}, {metric('grad_accum', 'count')} accumulation steps per rank",
        f"- Steps: {show('train', 'steps', unit='count')}; precision {show('train', 'precision')}; seed "
        f"{show('train', 'seed', unit='count')}",
        f"- Parallelism: {render(ctx.layout(winner), page)} on {metric('world_size', 'count')} "
        f"{metric('device_type')} processes (`{metric('device_name')}`), {metric('tokens_per_s', 'rounded')} "
        "tokens/s measured",
        f"- Full report: [{ctx.report_dir}/README.md]({report})",
    ]
    return "## Training set-up and data\n\n" + "\n".join(lines)


def _evaluation(ctx: Context, page: Page) -> str:
    if not ctx.benches:
        return "## Evaluation\n\nNot evaluated yet: no benchmark results were given to the latest report."
    rows = []
    for name, _ in ctx.benches:
        source = ctx.result(f"bench/{name}")
        for i, task in enumerate(ctx.sources.value(source, "tasks")):
            for metric in task["metrics"]:
                rows.append([
                    f"`{page.show(ctx.sources.figure(source, 'suite', unit='text'))}`",
                    page.show(ctx.sources.figure(source, "tasks", i, "task", unit="text")),
                    yes_no(task["private"]),
                    f"`{metric}`",
                    page.show(ctx.sources.figure(source, "tasks", i, "metrics", metric, unit="score")),
                    split_cell(ctx, page, source, i),
                    "**flagged**" if (task.get("contamination") or {}).get("flagged") else "no",
                ])  # fmt: skip
    header = ["suite", "task", "private", "metric", "value", "split", "contamination"]
    note = "Private tasks: aggregate scores only; their examples and labels are never published."
    return "## Evaluation\n\n" + table(header, rows) + "\n\n" + note


def _limitations(ctx: Context, page: Page) -> str:
    winner = ctx.sweep.winner
    config = ctx.run_file(winner, "config.yaml")
    steps = page.show(ctx.sources.figure(config, "train", "steps", unit="count"))
    lines = [
        f"- The figures come from sweep trials of {steps} optimizer steps: they measure speed and memory, not the "
        "quality of a fully trained model."
    ]
    if ctx.sources.value(ctx.run_file(winner, "metrics.json"), "device_type") == "cpu":
        lines.append("- Measured peak memory on CPU is the process's resident set, libraries included: an upper bound.")
    flagged = _flagged_tasks(ctx, page)
    if flagged:
        lines.append(f"- Possible contamination (test data overlapping training data): {flagged}.")
    failed = [t for t in ctx.sweep.trials if t.status != "ok"]
    if failed:
        listed = ", ".join(f"`{t.id}` ({t.status})" for t in failed)
        lines.append(f"- Layouts that did not finish, with their causes in the report: {listed}.")
    return "## Limitations\n\n" + "\n".join(lines)


def _flagged_tasks(ctx: Context, page: Page) -> str:
    names = []
    for name, bench in ctx.benches:
        source = ctx.result(f"bench/{name}")
        for i, task in enumerate(bench["tasks"]):
            if (task.get("contamination") or {}).get("flagged"):
                names.append(f"`{page.show(ctx.sources.figure(source, 'tasks', i, 'task', unit='text'))}`")
    return ", ".join(names)
