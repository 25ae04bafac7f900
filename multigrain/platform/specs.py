"""Spec files: Jsonnet evaluation, ``-o`` overrides, ``--ext-var`` parsing and the spec hash.

Nothing here builds objects (``config`` does that): these functions turn a file and the
command line into the resolved JSON spec whose canonical form is hashed into the run's identity.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Sequence

from multigrain.platform.digits import whole_number
from multigrain.platform.errors import ConfigurationError, Problem, SpecError, did_you_mean
from multigrain.platform.jsonio import too_long_number
from multigrain.platform.paths import stat_problem


def parse_ext_vars(pairs: list[str]) -> dict[str, str]:
    """``--ext-var NAME=VALUE`` pairs -> a dict; every malformed pair in one SpecError."""
    out, bad = {}, []
    for p in pairs or []:
        k, _, v = p.partition("=")
        if "=" not in p or not k:
            bad.append(Problem(f"--ext-var {p!r}", "expected NAME=VALUE" + ("" if "=" not in p else
                                                                           " (the name is empty)"), "argument"))
        elif k in out and out[k] != v:  # which one was meant is not for us to guess
            bad.append(Problem(f"--ext-var {k}", f"given twice ({out[k]!r} and {v!r}); give it once", "argument"))
        else:
            out[k] = v
    if bad:
        raise SpecError(bad)
    return out


# ---------------------------------------------------------------------------- Jsonnet
#: the project's spec library, beside the package (``jsonnet_configs/``)
PROJECT_SPECS = Path(__file__).resolve().parents[2] / "jsonnet_configs"


def import_roots(spec_path: str | Path, jsonnet_paths: Sequence[str | Path] = ()) -> list[Path]:
    """The folders a spec's Jsonnet imports may read: the spec's own folder, the project's
    ``jsonnet_configs/`` (beside the package and in the working directory) and ``--jsonnet-path``s."""
    roots = [Path(spec_path).resolve().parent, PROJECT_SPECS, Path.cwd().resolve() / "jsonnet_configs"]
    return list(dict.fromkeys([*roots, *(Path(p).resolve() for p in jsonnet_paths)]))


def _confined_imports(roots: list[Path]):
    """A Jsonnet import callback that reads only files under ``roots`` (symbolic links resolved);
    anything else is refused without being opened."""
    def read(base: str, rel: str) -> tuple[str, bytes]:
        target = (Path(base) / rel).resolve()
        if not any(target.is_relative_to(root) for root in roots):
            raise RuntimeError(f"refused: outside the folders specs may import from ({', '.join(map(str, roots))}; "
                               f"add one with --jsonnet-path DIR)")
        why = file_problem(target)
        if why:
            raise RuntimeError(why)
        text = utf8_text(target.read_bytes())
        if isinstance(text, Problem):
            raise RuntimeError(text.message)
        return str(target), text.encode("utf-8")

    return read


#: the largest spec or imported file read (bytes): specs are kilobytes; a larger file is refused unread
MAX_SPEC_BYTES = 16 * 1024 * 1024


def file_problem(path: Path) -> str | None:
    """Why a spec or a file it imports is not read: none, no regular file (a FIFO would block the
    read, a device never ends), or larger than ``MAX_SPEC_BYTES``; None when it is read."""
    try:
        info = os.stat(path)
    except OSError:
        return "no such file"
    return stat_problem(info, MAX_SPEC_BYTES, "spec file")


#: seconds a spec's Jsonnet may take to evaluate (``--jsonnet-timeout``): specs take milliseconds
JSONNET_TIMEOUT = 30.0


def evaluate_jsonnet(path: str | Path, ext_vars: dict[str, str] | None = None,
                     jsonnet_paths: Sequence[str | Path] = (), timeout: float | None = JSONNET_TIMEOUT,
                     what: str = "spec file") -> dict:
    """Evaluate a Jsonnet (or JSON) file (``what``: "spec file", "suite file") with only the given
    ext vars visible, imports read only from ``import_roots``, and at most ``timeout`` seconds
    (``None``: no limit): the evaluation runs in a child process (``jsonnet_child``), killed when the
    time is up. The file and its imports are read as UTF-8 (``utf8_text``)."""
    from multigrain.platform import jsonnet_child
    from multigrain.platform.paths import input_problem

    if problem := input_problem(path, what):
        raise ConfigurationError(problem)
    path = Path(path)
    if why := file_problem(path):
        raise ConfigurationError(f"{path}: {why}")
    try:  # the evaluator takes the path as UTF-8 text
        str(path.resolve()).encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"{path}: its path holds a byte that is no UTF-8, which Jsonnet cannot take; "
                                 f"rename the folder") from None
    text = utf8_text(path.read_bytes())
    if isinstance(text, Problem):
        raise SpecError([text], str(path))
    roots = import_roots(path, jsonnet_paths)
    outcome = jsonnet_child.evaluate(str(path), text, dict(ext_vars or {}), _confined_imports(roots), timeout)
    kind, detail = outcome[0], outcome[1:]
    if kind == "timeout":
        raise SpecError([Problem("", f"the Jsonnet evaluation took longer than {timeout:g} s and was stopped (an "
                                     f"endless recursion or a huge computation?); if the spec is right, allow "
                                     f"more with --jsonnet-timeout SECONDS", "jsonnet")], str(path))
    if kind == "memory":
        raise SpecError([Problem("", f"the Jsonnet evaluation needed more than {detail[0] / 1024 ** 3:g} GiB of "
                                     f"memory and was stopped (a huge computation?)", "jsonnet")], str(path))
    if kind == "died":
        raise SpecError([Problem("", f"the Jsonnet evaluation died ({detail[0]}) before it ended (out of memory "
                                     f"or stack?)", "jsonnet")], str(path))
    if kind == "unicode":
        raise SpecError([Problem("", f"not valid UTF-8 ({detail[0]} at byte {detail[1]} of the output or an "
                                     f"imported file)", "jsonnet")], str(path))
    if kind == "error":
        msg = detail[0].strip()
        if "undefined external variable" in msg:
            name = msg.split("undefined external variable:")[-1].split("\n")[0].strip()
            raise SpecError(
                [Problem("", f"missing ext var {name!r}: pass it with --ext-var {name}=VALUE"
                             f"{_given_instead(name, ext_vars or {})} ({_first_line(msg)})", "jsonnet")],
                str(path),
            )
        raise SpecError([Problem("", f"Jsonnet error: {_one_line(msg)}", "jsonnet")], str(path))
    spec = json.loads(detail[0])
    if not isinstance(spec, dict):
        raise SpecError([Problem("", f"the spec must evaluate to an object, got {type(spec).__name__}", "type")],
                        str(path))
    return spec


def utf8_text(raw: bytes) -> str | Problem:
    """A spec or imported file's text: UTF-8, a leading byte-order mark dropped (Windows editors write
    one; Jsonnet cannot read it). Other bytes are a Problem naming the first bad one's line and column,
    never replaced in silence (Jsonnet would read a GBK file's Chinese as U+FFFD)."""
    nul = raw.find(b"\0")
    if nul >= 0:  # the evaluator takes no NUL ("embedded null character")
        line, column = raw.count(b"\n", 0, nul) + 1, nul - raw.rfind(b"\n", 0, nul)
        return Problem("", f"a NUL byte at line {line}, column {column}; a spec is text", "jsonnet")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        return Problem("", f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at line {line}, column {column}); save "
                           f"the file as UTF-8", "jsonnet")


def _given_instead(name: str, ext_vars: dict) -> str:
    """A hint naming an ext var that was given and is close to the one the spec reads (a misspelling)."""
    close = difflib.get_close_matches(name, list(ext_vars), n=1, cutoff=0.6)
    return f"; --ext-var {close[0]} was given, which the spec does not read" if close else ""


def _one_line(msg: str) -> str:
    """Jsonnet's error as one line: its first, and the innermost place in a spec file of the stack
    trace after it (an endless recursion's trace is dozens of lines of the same frame)."""
    first, *frames = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    places = [f.split("\t")[0] for f in frames if ":" in f and not f.startswith(("std.jsonnet:", "During "))]
    return f"{first} (at {places[0]})" if places else first


def _first_line(msg: str) -> str:
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    return lines[1] if len(lines) > 1 else lines[0]


# ---------------------------------------------------------------------------- overrides
def parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise SpecError([Problem(f"override {text!r}", "expected KEY.PATH=VALUE", "override")])
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise SpecError([Problem(f"override {text!r}", "empty key", "override")])
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw  # a bare word is a string
    except ValueError:
        raise SpecError([Problem(f"override {key}", too_long_number(), "override")]) from None
    return key, value


def repeated_overrides(overrides: Sequence[str]) -> list[Problem]:
    """A key that the command line's ``-o`` sets twice to different values (``+KEY`` and ``KEY`` are
    one key): which one was meant is not for us to guess. (A suite layers its entry's, configuration's
    and rehearsal's overrides on purpose: ``apply_overrides`` lets a later one win.)"""
    seen: dict[str, Any] = {}
    problems = []
    for text in overrides:
        try:
            key, value = parse_override(text)
        except SpecError:
            continue  # apply_overrides reports it
        key = key.lstrip("+")
        if key in seen and seen[key] != value:
            problems.append(Problem(f"override {key}", f"given twice ({json.dumps(seen[key])} and {json.dumps(value)});"
                                                       f" give it once", "override"))
        seen.setdefault(key, value)
    return problems


def apply_overrides(spec: dict, overrides: list[str]) -> dict:
    """``-o trainer.optimizer.lr=0.01``: each key must already exist in the spec. ``-o +KEY=VALUE``
    (Hydra's convention) adds a key that does not exist yet, in an object that does."""
    spec = json.loads(json.dumps(spec))
    problems = []
    for text in overrides:
        try:
            key, value = parse_override(text)
        except SpecError as e:
            problems.extend(e.problems)
            continue
        adding = key.startswith("+")
        key = key[1:] if adding else key
        parts = key.split(".")
        node: Any = spec
        walked = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, list):
                idx: Any = whole_number(part, max_digits=9)
                if idx is None or idx >= len(node):
                    problems.append(Problem(f"override {key}", f"{'.'.join(walked) or 'spec'} is a list of "
                                                               f"{len(node)}; {part!r} is not an index in it", "override"))
                    break
            elif isinstance(node, dict):
                where = ".".join(walked) or "the spec"
                if adding and last and part in node:
                    problems.append(Problem(f"override +{key}", f"{where} already has key {part!r}; replace its "
                                                                f"value with -o {key}=VALUE", "override"))
                    break
                if part not in node and not (adding and last):
                    add = "" if adding else f"; to add it, use -o +{key}=VALUE"
                    problems.append(Problem(f"override {'+' if adding else ''}{key}",
                                            f"{where} has no key {part!r}{did_you_mean(part, node)}; "
                                            f"keys there: {', '.join(sorted(node))}{add}", "override"))
                    break
                idx = part
            else:
                problems.append(Problem(f"override {key}", f"{'.'.join(walked)} is a {type(node).__name__}, not an "
                                                           f"object", "override"))
                break
            walked.append(part)
            if last:
                node[idx] = value
            else:
                node = node[idx]
    if problems:
        raise SpecError(problems)
    return spec


def load_spec(path: str | Path, overrides: Sequence[str] = (), ext_vars: dict[str, str] | None = None,
              jsonnet_paths: Sequence[str | Path] = (), jsonnet_timeout: float | None = JSONNET_TIMEOUT) -> dict:
    """The resolved spec: Jsonnet evaluated (see ``evaluate_jsonnet``; at most ``jsonnet_timeout``
    seconds), then ``-o`` overrides."""
    spec = evaluate_jsonnet(path, ext_vars, jsonnet_paths, jsonnet_timeout)
    return apply_overrides(spec, list(overrides)) if overrides else spec


def _integral_floats_as_ints(value: Any) -> Any:
    """``value`` with every integral float written as Jsonnet writes it (``1.0`` -> ``1``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_integral_floats_as_ints(item) for item in value]
    return value


def spec_hash(spec: dict) -> str:
    """sha256 over canonical JSON: the run's identity. Numbers are canonical too: a spec built in
    Python with ``1.0`` is the spec Jsonnet manifests with ``1``."""
    canonical = json.dumps(_integral_floats_as_ints(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


#: model keys that name what encodes the text when there is no separate ``model.encoder``
ENCODER_STANDINS = ("backbone", "embedder", "text_field_embedder")


def encoder_name(model: dict) -> str:
    """The type of ``model.encoder``, else of the backbone/embedder that encodes the text alone
    (a backbone-only model: ``char_transformer``, ``hf_transformer``); empty when there is none."""
    for key in ("encoder", *ENCODER_STANDINS):
        part = model.get(key)
        if isinstance(part, dict) and isinstance(part.get("type"), str) and part["type"]:
            return part["type"]
        if isinstance(part, str) and part:
            return part
    return ""
