"""What the repository holds, read from disk: its runs and sweeps (newest first, as the tools order them), their
checkpoints, and its files. Names a user types ("r1", "baseline ddp", "the layouts sweep", "layots-nov", "the
long config") are resolved against it, never guessed.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.grammar import _one_swap
from agent.understanding.normalise import FILE_SUFFIXES, _close, _one_edit


@dataclass
class Known:
    root: Path | None = None
    runs: list[str] = field(default_factory=list)  # "runs/r1", newest first
    sweeps: list[str] = field(default_factory=list)  # "sweeps/lr-scan", newest first
    files: list[str] = field(default_factory=list)  # repository-relative paths of files a user may name

    @classmethod
    def read(cls, root: str | Path | None) -> Known:
        if root is None or not Path(root).is_dir():
            return cls()
        root = Path(root)
        return cls(root, _newest(root, "runs"), _newest(root, "sweeps"), _files(root))

    @property
    def names(self) -> set[str]:
        """Every run's and sweep's own name and every file's stem (kept as typed by the normaliser: "notes" is
        no typo of "nodes" where notes.md exists)."""
        return {p.split("/", 1)[1] for p in [*self.runs, *self.sweeps]} | {Path(f).stem for f in self.files}

    def stem(self, word: str) -> str | None:
        """The one top-level file whose stem is `word` ("my notes" are notes.md)."""
        found = [f for f in self.files if "/" not in f and Path(f).stem.lower() == word.lower()]
        return found[0] if len(found) == 1 else None

    def checkpoints(self, run: str) -> list[str]:
        """The checkpoints of a run, newest (highest step) first."""
        if self.root is None or not (self.root / run / "checkpoint").is_dir():
            return []
        found = [p for p in (self.root / run / "checkpoint").iterdir() if p.is_dir() and p.name.startswith("step_")]
        steps = sorted(found, key=lambda p: int(re.sub(r"\D", "", p.name) or 0), reverse=True)
        return [f"{run}/checkpoint/{p.name}" for p in steps]

    def resolve(self, words: str, kind: str, prefix: bool = True, close: bool = True) -> str | None:
        """The run or sweep (`kind`: "runs" or "sweeps") `words` names: exactly, with spaces for dashes, with one
        typo, or by the first part of its name ("the baseline" is baseline-ddp when it is the only one)."""
        candidates = self.runs if kind == "runs" else self.sweeps
        names = {p.split("/", 1)[1].lower(): p for p in candidates}
        word = re.sub(r"\s+", "-", words.strip().lower())
        if word in names:
            return names[word]
        reordered = [n for n in names if "-" in word and sorted(_parts(n)) == sorted(_parts(word))]
        if len(reordered) == 1:  # "ddp baseline" is baseline-ddp: every word of its name, in another order
            return names[reordered[0]]
        near = difflib.get_close_matches(word, names, n=2, cutoff=0.85) if close else []
        if close and not near:  # "tp-tyr": two letters swapped, which difflib's ratio scores low in a short name
            near = [n for n in names if _close(word, n)]
        near = [n for n in near if _typed_as(word, n)]  # "baseline-fsdp", "tp-try-2": other names, no typos
        if len(near) == 1 and len(word) >= 5:
            return names[near[0]]
        if not prefix:
            return None
        prefixed = [n for n in names if n.split("-")[0] == word or n.startswith(word + "-")]
        return names[prefixed[0]] if len(prefixed) == 1 and len(word) >= 2 else None

    def another_of(self, word: str) -> str | None:
        """The run or sweep whose name `word` is modelled on but is not ("tp-try-3", "baseline-fsdp", "layouts-oct":
        a word of the name added or replaced): a name the repository lacks, never a typo of that one."""
        said = _parts(word.lower())
        for path in [*self.runs, *self.sweeps]:
            own = _parts(path.split("/", 1)[1].lower())
            if len(own) < 2 or said == own:
                continue
            added = said[: len(own)] == own and len(said) > len(own)
            replaced = len(said) == len(own) and sum(a != b for a, b in zip(said, own, strict=True)) == 1
            if added or (replaced and not _typed_as(word, path.split("/", 1)[1])):
                return path
        return None

    def describe(self, words: list[str], kind: str) -> list[str]:
        """The runs or sweeps (`kind`) that every one of `words` describes: a part of its name ("baseline"), its
        layout ("ddp", "fsdp", "tp"), its outcome ("failed", "oom", "finished"), or for a sweep what its trials
        vary ("lr", "layout"). "the ddp baseline" is baseline-ddp, "the learning rate sweep" is lr-scan."""
        candidates = self.runs if kind == "runs" else self.sweeps
        wanted = [singular(w) for w in words]
        return [c for c in candidates if wanted and all(_fits(w, self.facts(c)) for w in wanted)]

    def facts(self, path: str) -> set[str]:
        """The words that describe a run or a sweep (see describe)."""
        name = path.split("/", 1)[-1].lower()
        found = {singular(part) for part in re.split(r"[-_.]", name) if part}
        if self.root is None:
            return found
        if path.startswith("runs/"):
            metrics = _json(self.root / path / "metrics.json")
            layout = metrics.get("layout") or {}
            found |= _layout_words(layout)
            # its degrees as written: "the tp=2 run" (no run with cp=2 is "the cp=2 run")
            found |= {f"{dim}={degree}" for dim, degree in layout.items() if isinstance(degree, int) and degree > 1}
            status = str(metrics.get("status", "")).lower()
            if status:
                found |= {"finished", "successful", "ok", "good", "completed", "done"} if status == "ok" else {
                    "failed", "crashed", "broken", "bad", status}  # fmt: skip
            return found
        trials = _json(self.root / path / "summary.json").get("trials") or []
        layouts = {json.dumps((t.get("params") or {}).get("layout"), sort_keys=True) for t in trials}
        if len(layouts) > 1:
            found |= {"layout", "parallelism", "mesh"}
        settings: dict[str, set[str]] = {}
        for trial in trials:
            for setting in trial.get("settings") or []:
                key, _, value = str(setting).partition("=")
                settings.setdefault(key, set()).add(value)
        for key, values in settings.items():
            if len(values) > 1:
                found.add(singular(key.rsplit(".", 1)[-1]))
        return found

    def launch_of(self, run: str) -> dict[str, object]:
        """The layout and processes a run ran with, from its metrics.json: what "the same as r1" repeats."""
        if self.root is None:
            return {}
        try:
            metrics = json.loads((self.root / run / "metrics.json").read_text())
        except (OSError, ValueError):
            return {}
        layout = ",".join(f"{k}={v}" for k, v in (metrics.get("layout") or {}).items() if int(v) > 1)
        found: dict[str, object] = {}
        if isinstance(metrics.get("world_size"), int):
            found["nproc"] = metrics["world_size"]
        if layout:
            found["layout"] = layout
        return found

    def winner_of(self, sweep: str) -> dict[str, object]:
        """The layout and processes of a sweep's winning trial, from its summary.json: what "launch that winner"
        runs."""
        if self.root is None:
            return {}
        summary = _json(self.root / sweep / "summary.json")
        trial = next((t for t in summary.get("trials") or [] if t.get("id") == summary.get("winner")), None)
        layout = ((trial or {}).get("params") or {}).get("layout") or {}
        degrees = ",".join(f"{k}={v}" for k, v in layout.items() if isinstance(v, int) and v > 1)
        found: dict[str, object] = {"layout": degrees} if degrees else {}
        if trial and isinstance(trial.get("nproc"), int):
            found["nproc"] = trial["nproc"]
        return found

    def file(self, path: str) -> str | None:
        """A file of the repository by its path, or by its name when only one file has it."""
        path = path.strip().removeprefix("./")
        if path in self.files:
            return path
        named = [f for f in self.files if f.rsplit("/", 1)[-1] == path]
        if not named:  # "configs/long.yml" is configs/long.yaml: the suffix spelled the other way
            named = [f for f in self.files if _same_suffix_spelling(path, f)]
        if not named:  # "meshpliot.yaml" is meshpilot.yaml: one typo of the one file of that suffix and folder
            named = [f for f in self.files if _typo_of(path, f)]
        return named[0] if len(named) == 1 else None

    def config_of_value(self, value: str) -> str | None:
        """The one experiment file that `value` tells apart ("the 1024 config" is configs/long.yaml, whose seq_len is
        1024 where meshpilot.yaml's is 256): a value it holds at a key where another experiment file differs. A value
        all of them share (max_position_embeddings 1024 in both) describes none."""
        settings = {f: _flat(_yaml(self.root / f)) for f in self.experiments()} if self.root else {}
        told = [f for f, mine in settings.items()
                if any(v == value and any(other.get(k) != v for g, other in settings.items() if g != f)
                       for k, v in mine.items())]  # fmt: skip
        return told[0] if len(told) == 1 else None

    def experiments(self) -> list[str]:
        """The repository's experiment files: its YAML files outside the runs and sweeps."""
        return [f for f in self.files if f.endswith((".yaml", ".yml")) and not f.startswith(("runs/", "sweeps/"))]

    def config(self, stem: str) -> str | None:
        """An experiment file by its stem ("the long config" is configs/long.yaml)."""
        found = [f for f in self.experiments() if Path(f).stem == stem.lower()]
        return found[0] if len(found) == 1 else None


def _yaml(path: Path) -> object:
    import yaml  # PyYAML only when a config is described by a value

    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None


def _flat(tree: object, prefix: str = "") -> dict[str, str]:
    """A loaded YAML tree as {dotted key: value as text}."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): str(tree)} if prefix else {}


def _typed_as(word: str, name: str) -> bool:
    """Whether `word` may be `name` typed with a typo: the same words in their places, each the same or one typo of
    it ("layots-nov", "tp-tyr", "baselin-ddp"). A word of the name replaced by another ("baseline-fsdp" for
    baseline-ddp, "layouts-oct" for layouts-nov) or one added ("tp-try-3", "lr-scan-2") names another run or sweep,
    one the repository lacks: never this one in its place. A name typed without its dashes ("lrscan") is left to
    the closeness alone."""
    said, own = _parts(word), _parts(name)
    if len(said) == 1 and len(own) > 1:
        return True
    if len(said) != len(own):
        return False
    return all(_part_typed_as(a, b) for a, b in zip(said, own, strict=True))


def _part_typed_as(said: str, own: str) -> bool:
    """One word of a name typed with one typo: two letters swapped, or in a word of three letters or more one
    letter changed, added or left out ("dpp" for ddp; "fsdp" or "tp" is another word)."""
    if said == own or _one_swap(said, own) or _close(said, own):
        return True
    return min(len(said), len(own)) >= 3 and not said.isdigit() and _one_edit(said, own)


def _parts(name: str) -> list[str]:
    """The words of a run's or sweep's name ("baseline-ddp": baseline, ddp)."""
    return [part for part in re.split(r"[-_]", name) if part]


def _typo_of(path: str, existing: str) -> bool:
    """Whether `path` is `existing` typed with one typo in its file name (same folder, or none said, and suffix; a
    stem of five letters or more; a shorter one, which has too many neighbours one letter away, only with two
    neighbouring letters swapped: "configs/lnog.yaml"), or in its folder's name with the file's own name exact
    ("cofigs/long.yaml" is configs/long.yaml). Known.file takes it only where one file on disk is so close."""
    folder, _, name = path.rpartition("/")
    its_folder, _, its_name = existing.rpartition("/")
    if folder and its_folder and folder.lower() != its_folder.lower():  # the name exact, its suffix either spelling
        same_name = Path(name).stem.lower() == Path(its_name).stem.lower() and _suffix(name) == _suffix(its_name)
        return same_name and _close(folder.lower(), its_folder.lower())
    stem, suffix = Path(name).stem.lower(), _suffix(name)
    its_stem = Path(its_name).stem.lower()
    if (folder and folder != its_folder) or suffix != _suffix(its_name) or stem == its_stem:
        return False
    if re.sub(r"\D", "", stem) != re.sub(r"\D", "", its_stem):  # "meshpilot2.yaml" is another file, not a typo
        return False
    if len(its_stem) >= 5:
        return _close(stem, its_stem)
    # a shorter stem: two letters swapped, or one left out or added ("configs/lng.yaml" is configs/long.yaml; the
    # folder and suffix already agree, so few files are near), never one changed ("tiny" and "tidy" are two words)
    return _one_swap(stem, its_stem) or (
        len(its_stem) >= 4 and len(stem) != len(its_stem) and _one_edit(stem, its_stem)
    )


# Two spellings of one suffix: a file named with either is the one the repository has.
_SUFFIX_SPELLINGS = {".yml": ".yaml", ".jsonlines": ".jsonl", ".markdown": ".md"}


def _suffix(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return _SUFFIX_SPELLINGS.get(suffix, suffix)


def _same_suffix_spelling(path: str, existing: str) -> bool:
    """Whether `path` is `existing` with its suffix spelled the other way ("long.yml" for "long.yaml"), by its full
    path or, when no folder is given, by its name."""
    named = existing if "/" in path else existing.rsplit("/", 1)[-1]
    same_stem = Path(path.lower()).with_suffix("") == Path(named.lower()).with_suffix("")
    return same_stem and _suffix(path) == _suffix(named) and path.lower() != named.lower()


def _newest(root: Path, kind: str) -> list[str]:
    """The directories under root/kind, newest first: the order of the tools' list_results (agent.tools)."""
    from agent.tools import _newest as newest_first  # imported here: agent.tools loads langgraph (a second)

    return [f"{kind}/{d.name}" for d in newest_first(root / kind)]


def _files(root: Path) -> list[str]:
    """Files at the top, one level down (configs/, docs/) and in each run directory; not the state or git dirs."""
    found = [p for p in root.glob("*") if p.is_file()]
    found += [p for p in root.glob("*/*") if p.is_file() and not p.parts[-2].startswith(".")]
    found += [p for p in root.glob("runs/*/*") if p.is_file()]
    return sorted(str(p.relative_to(root)) for p in found if p.suffix in FILE_SUFFIXES)


# Words for a layout's parallelism, as people name a run by it ("the ddp baseline", "the FSDP run").
_LAYOUT_NAMES = {"dp_shard": {"fsdp", "sharded", "zero3"}, "dp_replicate": {"ddp", "replicated", "replicate"},
                 "tp": {"tp", "tensor"}, "pp": {"pp", "pipeline"}, "cp": {"cp", "context"}}  # fmt: skip


def _layout_words(layout: dict) -> set[str]:
    used = {dim for dim, degree in layout.items() if isinstance(degree, int) and degree > 1}
    if used <= {"dp_replicate"}:  # "the run without sharding", "the plain data parallel one": no dim splits the model
        return {"unsharded"} | {w for dim in used for w in _LAYOUT_NAMES[dim]}
    if {"dp_shard", "dp_replicate"} <= used:
        return {"hsdp", "hybrid"} | {w for d in used - {"dp_shard", "dp_replicate"} for w in _LAYOUT_NAMES[d]}
    return {w for dim in used for w in _LAYOUT_NAMES.get(dim, set())}


def _fits(word: str, facts: set[str]) -> bool:
    """A word of a description is a fact, or the fact's short form is the word's start ("november" for "nov")."""
    return word in facts or any(len(f) >= 3 and word.startswith(f) for f in facts)


def singular(word: str) -> str:
    """A word without its plural "s" ("layouts" is "layout"), lowered."""
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _json(path: Path) -> dict:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
