"""The offline planner's replies, written from tool results: every figure quoted with the file it was read from
(the result's "source"), so that agent.figures can check it.

Why one layout ranks below another is said in one place, `behind_because`: the chat's answers (and so the TUI's)
and the report's "why it was chosen" use it, so they never explain the same result two ways.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer.layout import ONE_PROCESS, layout_family, layout_name
from trainer.results.schemas import PREEMPTED

RUNNERS_UP = 3  # other families an explanation compares the winner with
# What each parallel dimension costs in trainer.costs.throughput's model, said once per family part (no digits: the
# report prints these beside figures that its ledger traces, and fixed text there holds none).
COSTS = {
    "FSDP": "FSDP gathers the parameters again for every micro-batch",
    "HSDP": "HSDP gathers parameters within a group and all-reduces gradients across groups",
    "DDP": "DDP all-reduces every gradient once per step",
    "TP": "tensor parallel all-reduces activations in every layer, on the critical path",
    "PP": "the pipeline idles while its stages fill and drain in every step (the bubble)",
    "CP": "context parallel all-gathers keys and values in every layer and reduce-scatters their gradients",
}


def describe_plan(result: dict) -> str:
    top = result["top"]
    if not top:
        reasons = "; ".join(f"{n} {r}" for r, n in result["dropped"].items())
        where = f"{result['devices']} x {result['nodes']} devices"
        return f"No layout fits on {where} ({reasons}). (source: {result['source']})"
    lines = [
        f"Fastest layouts{_planned_model(result)} on {result['devices']} device(s) x {result['nodes']} node(s), "
        f"{result['device_type']}, {result['device_mem_gib']:.3g} GiB each, as predicted by the memory and "
        "throughput models:",
        "",
    ]
    for i, c in enumerate(top, 1):
        name = c["layout"] if c["family"] == ONE_PROCESS else f"{c['family']} {c['layout']}"
        lines.append(
            f"{i}. {name}, micro-batch {c['micro_batch']} x {c['grad_accum']} "
            f"accumulated{', checkpointing' if c['activation_checkpointing'] else ''}: "
            f"{c['predicted_tokens_per_s']:,.0f} tokens/s, {c['predicted_peak_gib']:.3g} GiB per device"
            + (f" ({'; '.join(c['notes'])})" if c["notes"] else "")
        )
    dropped = "".join(f"; {n} dropped: {reason}" for reason, n in result["dropped"].items())
    lines += ["", f"{result['feasible']} candidates fit{dropped}. (source: {result['source']})"]
    return "\n".join(lines)


def compare_plans(before: dict, after: dict) -> str:
    """A what-if against the plan before it ("how much faster with 16 GPUs over 2 nodes?"): both best figures."""
    if not before["top"] or not after["top"]:
        return "One of the two plans has no layout that fits, so there is nothing to compare."
    old, new = before["top"][0], after["top"][0]
    verdict = "faster" if new["predicted_tokens_per_s"] > old["predicted_tokens_per_s"] else "not faster"
    return (
        f"Predicted best: {new['predicted_tokens_per_s']:,.0f} tokens/s ({new['family']} {new['layout']}) on "
        f"{after['devices']} device(s) x {after['nodes']} node(s), against {old['predicted_tokens_per_s']:,.0f} "
        f"tokens/s ({old['family']} {old['layout']}) on {before['devices']} device(s) x {before['nodes']} node(s) "
        f"in the plan before: {verdict}. (sources: {after['source']}, {before['source']})"
    )


def _planned_model(result: dict) -> str:
    """ " for llama-3.1-8b at sequence length 4096" when the plan was of a preset."""
    preset = result.get("model")
    if not preset or preset == "the experiment's":
        return ""
    return f" for {preset} at sequence length {result['seq_len']}"


def explain_plan(result: dict, asked: str | None) -> str:
    """Why the winner won: its figures beside the best candidate of every other family."""
    top = result["top"]
    if not top:
        return describe_plan(result)
    winner = top[0]
    families = result["best_by_family"]
    asked = _closest_family(asked or winner["family"], families)
    lines = []
    if asked != winner["family"] and asked not in families:
        lines.append(f"No {asked} layout fits or applies here, so it could not win. {winner['family']} won:")
    elif asked != winner["family"]:
        lines.append(f"{asked} did not win: {winner['family']} did.")
    lines.append(f"{winner['family']} ({winner['layout']}) {_figures(winner)}.")
    for family in _runners_up(families, winner["family"], asked):
        best = families[family]
        lines.append(f"Best {family} ({best['layout']}): {_figures(best)}; {behind_because(best, winner)}.")
    lines.append(
        f"These are predictions; a run measures them (e.g. `/run layout={_layout_arg(winner)}`). "
        f"(source: {result['source']})"
    )
    return "\n".join(lines)


def _figures(c: dict) -> str:
    return (
        f"predicts {c['predicted_tokens_per_s']:,.0f} tokens/s ({c['predicted_step_s']:.4g} s per step), "
        f"peaks at {c['predicted_peak_gib']:.3g} GiB per device and moves {c['comm_gib_per_step']:.3g} GiB per step"
    )


def behind_because(other: dict, winner: dict) -> str:
    """Why `other` ranks below `winner`, in words."""
    return "behind because " + ("; ".join(reasons_behind(other, winner)) or "its collectives are on the critical path")


def reasons_behind(other: dict, winner: dict) -> list[str]:
    """The costs (in trainer.costs.throughput's model) `other` has that `winner` has not."""
    mine, theirs = set(other["family"].split("+")), set(winner["family"].split("+"))
    reasons = [COSTS[part] for part in sorted(mine - theirs) if part in COSTS]
    if other.get("comm_gib_per_step", 0) > winner.get("comm_gib_per_step", 0):
        reasons.append("it moves more data between devices per step")
    if other["activation_checkpointing"] and not winner["activation_checkpointing"]:
        reasons.append("it recomputes activations in the backward pass")
    if other["grad_accum"] > winner["grad_accum"]:
        reasons.append("it runs more, smaller micro-batches per step")
    return reasons


def _layout_arg(c: dict) -> str:
    return c["layout"] if c["layout"] != ONE_PROCESS else "dp_replicate=1"


def describe_run(result: dict) -> str:
    state = result.get("state")
    metrics = result.get("metrics") or {}
    where = f"(source: {result['source']})"
    if state in ("queued", "running"):
        step = f": step {result['step']} of {result['steps']}" if result.get("step") is not None else ""
        return f"Run {result['run']} is {state}{step}. {where}"
    if state != "ok":
        cause = result.get("cause") or metrics.get("error") or "no cause recorded"
        step = f" at step {result['step']} of {result['steps']}" if result.get("step") is not None else ""
        return f"Run {result['run']} is {state}{step}: {cause}{resumable(state, result['run'])} {where}"
    parts = [f"Run {result['run']} finished ok"]
    if metrics.get("final_loss") is not None:
        parts.append(f"final loss {metrics['final_loss']:.4f}")
    if metrics.get("tokens_per_s") is not None:
        parts.append(f"{metrics['tokens_per_s']:,.0f} tokens/s")
    if metrics.get("peak_mem_bytes"):
        parts.append(f"peak memory {max(metrics['peak_mem_bytes']) / 2**30:.3f} GiB per rank")
    if metrics.get("layout"):
        parts.append(f"layout {layout_name(metrics['layout'])}")
    return ", ".join(parts) + f". {where}"


def describe_job(result: dict) -> str:
    """What wait_for_job found: a run's state, or a sweep's (its summary once it ended ok)."""
    if result.get("kind") != "sweep":
        return describe_run(result)
    if result["state"] == "ok" and "trials" in result:
        return describe_sweep(result)
    where = f"(source: {result['source']})"
    if result["state"] in ("queued", "running"):
        return f"Sweep {result['sweep']} is {result['state']}: {result['trials_ended']} trial(s) ended so far. {where}"
    cause = result["cause"] or "no cause recorded"
    return f"Sweep {result['sweep']} is {result['state']}: {cause}{resumable(result['state'], result['sweep'])} {where}"


def resumable(state: str | None, job: str) -> str:
    """What a preempted job's reply adds: it is not lost, it can be continued (the resume_job tool)."""
    return f'. It is resumable: say "resume {job}" to continue it from its checkpoint.' if state == PREEMPTED else ""


def describe_resumed(result: dict) -> str:
    """What resume_job started."""
    kind = "sweep" if "sweep" in result else "run"
    started = f"Resumed the preempted {kind} {result['job_id']} in its own directory"
    return f"{started}; ask whether it is done. (source: {result['source']})"


def describe_results(result: dict) -> str:
    fields = [f"status {result['status']}"]
    if result.get("final_loss") is not None:
        fields.append(f"final loss {result['final_loss']:.4f}")
    if result.get("tokens_per_s") is not None:
        fields.append(f"{result['tokens_per_s']:,.0f} tokens/s ({result['tokens_per_s_per_device']:,.0f} per device)")
    if result.get("error"):
        fields.append(f"error: {result['error']}")
    text = f"Results: {', '.join(fields)}. (source: {result['source']})"
    if result.get("memory"):
        memory = result["memory"]
        predicted, measured = memory["rank0_predicted"]["peak"], memory["rank0_measured"]["peak"]
        text += (f"\nRank 0 peak memory: predicted {predicted / 2**30:.3f} GiB, measured {measured / 2**30:.3f} GiB "
                 f"({memory['peak_source']}) (source: {memory['source']})")  # fmt: skip
    if result.get("steps_file"):
        losses = ", ".join(f"{s['step']}: {s['loss']:.4f}" for s in result["steps_file"]["losses"])
        text += f"\nLoss by step: {losses} (source: {result['steps_file']['source']})"
    return text


def describe_hardware(result: dict) -> str:
    memory = f", {result['device_mem_bytes'] / 2**30:.1f} GiB each" if result.get("device_mem_bytes") else ""
    return (
        f"This machine: {result['devices']} {result['device_type']} device(s) ({result['device_name']}{memory}), "
        f"link {result['intra_node_link']}, {result['cpu_cores']} CPU cores. (source: {result['source']})"
    )


def describe_file(result: dict) -> str:
    if "entries" in result:
        return f"{result['source']}:\n" + "\n".join(result["entries"])
    more = f"\n(more from offset {result['next_offset']})" if result.get("next_offset") else ""
    return f"{result['source']}:\n```\n{result['text']}\n```{more}"


def describe_sweep(result: dict) -> str:
    trials = result["trials"]
    ok = [t for t in trials if t["status"] == "ok"]
    lines = [f"Sweep {result['sweep']}: {len(trials)} trials, {len(ok)} ok, objective {result['objective']}."]
    winner = next((t for t in trials if t["id"] == result["winner"]), None)
    if winner is None:
        lines.append("No trial finished ok, so none won.")
    else:
        lines.append(f"Winner: trial {winner['id']}, {_trial_figures(winner)}.")
    planner = result.get("planner") or {}
    if planner.get("top_pick") and planner.get("quality_ratio") is not None:
        lines.append(f"The planner's top pick, trial {planner['top_pick']}, reached {planner['quality_ratio']:.1%} "
                     "of the best measured tokens/s.")  # fmt: skip
    return "\n".join(lines) + f" (source: {result['source']})"


def explain_sweep(result: dict, asked: str | None) -> str:
    """Why the sweep's winner won: measured figures beside the best trial of every other family."""
    objective = result["objective"]
    ok = [trial_candidate(t) for t in result["trials"] if t["status"] == "ok" and t.get(objective) is not None]
    if not ok:
        return f"No trial of the sweep finished ok, so nothing won. (source: {result['source']})"
    best_first = sorted(ok, key=lambda t: -t[objective] if objective == "tokens_per_s" else t[objective])
    winner = next((t for t in best_first if t["id"] == result["winner"]), best_first[0])
    families: dict[str, dict] = {}
    for trial in best_first:
        families.setdefault(trial["family"], trial)
    asked = _closest_family(asked or winner["family"], families)
    lines = [] if asked == winner["family"] else [f"{asked} did not win the sweep: {winner['family']} did."]
    if asked not in families:
        lines = [f"No {asked} trial finished ok in the sweep, so {asked} could not win."]
    lines.append(f"{winner['family']} won with trial {winner['id']}, {_trial_figures(winner)}.")
    for family in _runners_up(families, winner["family"], asked):
        best = families[family]
        lines.append(f"Best {family}, trial {best['id']}, {_trial_figures(best)}; {behind_because(best, winner)}.")
    return "\n".join(lines) + f" (source: {result['source']})"


def _runners_up(families: dict[str, dict], winner: str, asked: str) -> list[str]:
    """The best-ranked other families (families is ordered best first), and the one asked about wherever it ranks."""
    others = [f for f in families if f != winner][:RUNNERS_UP]
    if asked in families and asked not in others and asked != winner:
        others.append(asked)
    return others


def trial_candidate(trial: dict) -> dict:
    """A sweep trial (summary.json's record) with the fields behind_because reads."""
    params = trial["params"]
    return {**trial, "family": layout_family(params["layout"]), "grad_accum": params["grad_accum"],
            "activation_checkpointing": params["activation_checkpointing"]}  # fmt: skip


def _trial_figures(trial: dict) -> str:
    params = trial["params"]
    layout = layout_name(params["layout"])
    parts = [f"{layout}, micro-batch {params['micro_batch']}"]
    if trial.get("tokens_per_s") is not None:
        parts.append(f"measured {trial['tokens_per_s']:,.0f} tokens/s")
    if trial.get("final_loss") is not None:
        parts.append(f"final loss {trial['final_loss']:.4f}")
    if trial.get("peak_mem_bytes") is not None:
        parts.append(f"peak {trial['peak_mem_bytes'] / 2**30:.3f} GiB")
    if trial.get("predicted_tokens_per_s") is not None:
        parts.append(f"predicted {trial['predicted_tokens_per_s']:,.0f} tokens/s")
    return ", ".join(parts)


def describe_bench(result: dict) -> str:
    lines = [f"Benchmark {result['suite']} on {result['model']}:"]
    for task in result["tasks"]:
        scores = ", ".join(f"{k} {v:.4g}" for k, v in task["metrics"].items() if isinstance(v, int | float))
        private = " (private split)" if task["private"] else ""
        lines.append(f"- {task['task']} {task['split']}{private}, {task['n_examples']} examples: {scores}")
    return "\n".join(lines) + f"\n(source: {result['source']})"


def describe_report(result: dict) -> str:
    text = f"Report written to {result['report_path']} on branch {result['branch']}"
    text += f", commit {result['commit'][:12]}." if result.get("commit") else " (nothing new to commit)."
    pull_request = result.get("pr") or {}
    if pull_request.get("url"):
        text += f" Pull request: {pull_request['url']}"
    return text


def describe_docs(result: dict) -> str:
    """What update_docs proposed: the docs it rewrote, their branch and commit, and the pull request."""
    docs = ", ".join(result["docs"]) or "no docs (the sweep has no winner to recommend)"
    text = f"Docs updated from {result['sweep']}: {docs}, with the report {result['report_path']}"
    text += f" on branch {result['branch']}, commit {result['commit'][:12]}." if result.get("commit") else "."
    pull_request = result.get("pr") or {}
    if pull_request.get("url"):
        text += f" Pull request: {pull_request['url']}"
    return text


def describe_fields(result: dict) -> str:
    """Any other result: its plain fields, one per line."""
    lines = [f"{k}: {v}" for k, v in result.items() if k != "source" and isinstance(v, str | int | float | bool)]
    return "\n".join(lines) + f"\n(source: {result['source']})"


def describe_runs(result: dict) -> str:
    if not result["runs"]:
        return "No runs yet under runs/."
    return "\n".join(f"{r['run']}: {_listed_status(r['status'])}" for r in result["runs"])


def _listed_status(status: str | None) -> str:
    return "no results yet" if status is None else f"{status} (resumable)" if status == PREEMPTED else status


def _closest_family(asked: str, families: dict[str, dict]) -> str:
    """The family asked about, or failing that the best one that includes it ("TP" finds "FSDP+TP")."""
    if asked in families:
        return asked
    return next((f for f in families if asked in f.split("+")), asked)


# --- answers to questions about results ---------------------------------------------------------------------------

MEMORY_CATEGORIES = {"parameters": "parameters", "gradients": "gradients", "optimizer": "optimizer state",
                     "activations_saved": "activations saved for backward", "temporaries": "temporaries",
                     "weight_copies_saved": "weight copies saved", "peak": "peak"}  # fmt: skip
# The topics a question may name, and the category of memory each stands for.
TOPIC_CATEGORY = {"optimizer": "optimizer", "gradients": "gradients", "parameters": "parameters",
                  "activations": "activations_saved", "peak": "peak"}  # fmt: skip


def answer_results(result: dict, topics: list[str]) -> str:
    """A run's results, answering the topics asked first (all of them when none was named)."""
    if not topics:  # "show me the results": the summary of every result file
        return describe_results(result)
    asked = set(topics)
    error = f" ({result['error']})" if result.get("error") else ""
    lines = [f"Run {result['run']}: status {result['status']}{error}. (source: {result['source']})"]
    memory = result.get("memory")
    if asked & {"memory", "predicted", *TOPIC_CATEGORY} and memory:
        lines += _memory_lines(memory, [TOPIC_CATEGORY[t] for t in topics if t in TOPIC_CATEGORY])
    elif asked & {"memory", *TOPIC_CATEGORY} and result.get("peak_mem_bytes"):
        peaks = ", ".join(f"{b / 2**20:,.1f} MiB" for b in result["peak_mem_bytes"])
        lines.append(
            f"Measured peak memory per rank: {peaks}; this run has no memory.json. (source: {result['source']})"
        )
    if asked & {"throughput", "predicted", "mfu"} and result.get("tokens_per_s") is not None:
        lines.append(f"Throughput: {result['tokens_per_s']:,.1f} tokens/s ({result['tokens_per_s_per_device']:,.1f} "
                     f"per device) on {result['world_size']} {result['device_type']} process(es). "
                     f"(source: {result['source']})")  # fmt: skip
    if "mfu" in asked:
        mfu = result.get("mfu")
        missing = f"not recorded (no known bf16 peak for {result['device_name']})"
        lines.append(f"MFU: {f'{mfu:.1%}' if mfu is not None else missing}. (source: {result['source']})")
    if "loss" in asked:
        lines += _loss_lines(result)
    if "gns" in asked:
        lines.append(_noise_scale_line(result))
    return "\n".join(lines)


def _memory_lines(memory: dict, first: list[str]) -> list[str]:
    """Memory of rank 0 by category, measured beside predicted, the categories asked about first."""
    predicted, measured = memory["rank0_predicted"], memory["rank0_measured"]
    names = [c for c in MEMORY_CATEGORIES if c in predicted or c in measured]
    order = [c for c in first if c in names] + [c for c in names if c not in first]
    lines = [f"Memory of rank 0, measured against predicted (source: {memory['source']}):"]
    for category in order:
        shown = [f"{label} {_mib(side.get(category))}" for label, side in (("measured", measured),
                 ("predicted", predicted)) if side.get(category) is not None]  # fmt: skip
        verdict = _versus(measured.get(category), predicted.get(category))
        lines.append(f"- {MEMORY_CATEGORIES[category]}: {', '.join(shown)}{verdict}")
    if memory.get("peak_source"):
        lines.append(f"The measured peak is the {memory['peak_source']}.")
    return lines


def _versus(measured: float | None, predicted: float | None) -> str:
    if measured is None or predicted is None:
        return ""
    if measured == predicted:
        return " (as predicted)"
    return " (above the prediction)" if measured > predicted else " (below the prediction)"


def _mib(size: float | None) -> str:
    return f"{size / 2**20:,.3f} MiB"


def _loss_lines(result: dict) -> list[str]:
    lines = []
    if result.get("final_loss") is not None:
        lines.append(f"Final loss: {result['final_loss']:.4f}. (source: {result['source']})")
    if result.get("steps_file"):
        losses = ", ".join(f"{s['step']}: {s['loss']:.4f}" for s in result["steps_file"]["losses"])
        lines.append(f"Loss by step: {losses} (source: {result['steps_file']['source']})")
    return lines or ["No loss recorded yet."]


def _noise_scale_line(result: dict) -> str:
    if result.get("gns") is None:
        return f"Gradient noise scale: not measured ({result.get('gns_note') or 'train.gns_every is 0'})."
    batch = result.get("recommended_global_batch_tokens")
    advice = f"; the batch it recommends is {batch:,} tokens per optimizer step" if batch else ""
    return (f"Gradient noise scale: {result['gns']:,.1f} tokens{advice} (train.global_batch_tokens). "
            f"(source: {result['source']})")  # fmt: skip


def compare_runs(results: list[dict]) -> str:
    """Runs side by side: layout, status, throughput, peak memory measured and predicted, final loss."""
    rows = {
        "status": [r["status"] for r in results],
        "layout": [_layout_name(r.get("layout")) for r in results],
        "processes": [str(r.get("world_size")) for r in results],
        "tokens/s": [_shown(r.get("tokens_per_s"), "{:,.1f}") for r in results],
        "final loss": [_shown(r.get("final_loss"), "{:.4f}") for r in results],
        "measured peak, rank 0": [_memory_figure(r, "rank0_measured") for r in results],
        "predicted peak, rank 0": [_memory_figure(r, "rank0_predicted") for r in results],
    }
    sources = ", ".join(r["source"] for r in results)
    return _table(["", *(r["run"] for r in results)], rows) + f"\n\n(sources: {sources})"


def _memory_figure(result: dict, side: str) -> str:
    return _mib_or_dash(((result.get("memory") or {}).get(side) or {}).get("peak"))


def _mib_or_dash(size: float | None) -> str:
    return "-" if size is None else _mib(size)


def _shown(value: Any, form: str) -> str:
    return "-" if value is None else form.format(value)


def _table(header: list[str], rows: dict[str, list[str]]) -> str:
    lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)]
    return "\n".join(lines + [f"| {name} | {' | '.join(cells)} |" for name, cells in rows.items()])


def _layout_name(degrees: dict | None) -> str:
    if not degrees:
        return "-"
    name = layout_name(degrees)
    return name if name == ONE_PROCESS else f"{layout_family(degrees)} {name}"


def compare_trials(result: dict) -> str:
    """A sweep's trials side by side, measured beside predicted, after the winner."""
    trials = result["trials"]
    rows = {
        "layout": [_layout_name(t["params"]["layout"]) for t in trials],
        "status": [t["status"] for t in trials],
        "tokens/s measured": [_shown(t.get("tokens_per_s"), "{:,.0f}") for t in trials],
        "tokens/s predicted": [_shown(t.get("predicted_tokens_per_s"), "{:,.0f}") for t in trials],
        "peak measured": [_mib_or_dash(t.get("peak_mem_bytes")) for t in trials],
        "peak predicted": [_mib_or_dash(t.get("predicted_peak_bytes")) for t in trials],
        "final loss": [_shown(t.get("final_loss"), "{:.4f}") for t in trials],
    }
    return describe_sweep(result) + "\n\n" + _table(["", *(f"trial {t['id']}" for t in trials)], rows)


def compare_plan(result: dict, families: list[str]) -> str:
    """The best layout of each family asked about, side by side, as the planner predicted them."""
    best = result["best_by_family"]
    found = [best.get(f) for f in families]  # the family itself: "DDP" is not "DDP+TP"

    def cells(form: Callable[[dict], str]) -> list[str]:
        return [form(c) if c else "-" for c in found]

    rows = {
        "layout": [c["layout"] if c else "none fits" for c in found],
        "micro-batch x accumulation": cells(lambda c: f"{c['micro_batch']} x {c['grad_accum']}"),
        "predicted tokens/s": cells(lambda c: f"{c['predicted_tokens_per_s']:,.0f}"),
        "predicted peak GiB per device": cells(lambda c: f"{c['predicted_peak_gib']:.3g}"),
        "GiB moved per step": cells(lambda c: f"{c['comm_gib_per_step']:.3g}"),
    }
    lines = [_table(["", *families], rows)]
    present = [(f, c) for f, c in zip(families, found, strict=True) if c]
    if len(present) >= 2:
        ranked = sorted(present, key=lambda pair: -pair[1]["predicted_tokens_per_s"])
        shown = [f"{c['predicted_tokens_per_s']:,.0f}" for _, c in ranked[:2]]
        verdict = (
            f"{ranked[0][0]} and {ranked[1][0]} are predicted equally fast"
            if shown[0] == shown[1]
            else (f"{ranked[0][0]} is predicted faster")
        )
        lines.append(f"{verdict}. (source: {result['source']})")
    for family, candidate in zip(families, found, strict=True):
        if candidate is None:
            reason = (result.get("dropped_by_family") or {}).get(family) or "no candidate of it divides this set-up"
            lines.append(f"No {family} layout fits: {reason}.")
            combined = _closest_family(family, best)
            if combined in best:
                other = best[combined]
                lines.append(f"With another dimension it does: {combined} {other['layout']} predicts "
                             f"{other['predicted_tokens_per_s']:,.0f} tokens/s.")  # fmt: skip
    return "\n\n".join(lines)


def describe_where(result: dict) -> str:
    """Where the reports, pull requests and latest results are."""
    lines = []
    for report in result.get("reports", []):
        lines.append(f"Report {report['path']} on branch {report['branch']}.")
    for pull in result.get("pull_requests", []):
        lines.append(f"Pull request for branch {pull['branch']}: {pull['description']}.")
    if not lines:
        lines.append("No report or pull request yet: ask me to write the report of a sweep (`/report`).")
    return "\n".join(lines) + f" (source: {result['source']})"
