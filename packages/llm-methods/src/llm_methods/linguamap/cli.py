"""``llm-methods linguamap``: LinguaMap's measurements on your own outputs and models.

- ``consistency FILE --expect es``: language consistency of answers (one per line of a ``.txt``, or
  the ``--field`` of each ``.jsonl`` record) with the offline detector (py3langid, en/es/de).
- ``similarity --model SPEC --parallel FILE.jsonl``: per-layer cross-lingual cosine of mean-pooled
  hidden states; each record holds the same text in two or more languages (``{"en": ..., "es": ...}``).

The training experiment is ``iclr26 reproduce llm-methods.linguamap.selective_ft``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

ABOUT = "LinguaMap language control (arXiv 2601.20009): consistency and cross-lingual similarity"
PROG = "llm-methods linguamap"


def _read_answers(path: Path, field: str) -> list[str]:
    from llm_methods.jsonl import read_text
    from llm_methods.lm.errors import LMError

    if not path.is_file():
        raise LMError(f"{path}: no such file")
    lines = read_text(path).splitlines()
    if path.suffix != ".jsonl":
        texts = [line for line in lines if line.strip()]
    else:
        texts = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise LMError(f"{path}:{number}: not JSON ({error.msg})") from error
            if not isinstance(record, dict) or not isinstance(record.get(field), str):
                raise LMError(f"{path}:{number}: field {field!r} missing or not a string")
            texts.append(record[field])
    if not texts:
        raise LMError(f"{path}: no answers")
    return texts


def _read_parallel(path: Path) -> dict[str, list[str]]:
    from llm_methods.jsonl import read_text
    from llm_methods.lm.errors import LMError

    if not path.is_file():
        raise LMError(f"{path}: no such file")
    parallel: dict[str, list[str]] = {}
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise LMError(f"{path}:{number}: not JSON ({error.msg})") from error
        if not isinstance(record, dict) or len(record) < 2:
            raise LMError(f"{path}:{number}: need an object with texts in >= 2 languages")
        if parallel and set(record) != set(parallel):
            raise LMError(f"{path}:{number}: languages {sorted(record)} != {sorted(parallel)}")
        for lang, text in record.items():
            if not isinstance(text, str) or not text.strip():
                raise LMError(f"{path}:{number}: field {lang!r} is empty or not a string")
            parallel.setdefault(lang, []).append(text)
    if not parallel:
        raise LMError(f"{path}: no records")
    return parallel


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cons = sub.add_parser("consistency", help="share of answers detected in the expected language")
    cons.add_argument("answers", type=Path, help=".txt (one answer per line) or .jsonl")
    cons.add_argument("--expect", required=True, choices=["en", "es", "de"])
    cons.add_argument("--field", default="answer", help="jsonl field holding the answer")
    sim = sub.add_parser("similarity", help="per-layer cross-lingual cosine of a model")
    sim.add_argument("--model", required=True, help="model spec (smollm2, zoo:NAME, folder, .gguf)")
    sim.add_argument("--parallel", type=Path, required=True, help="jsonl: {lang: text, ...}")
    sim.add_argument("--device", default=None)
    ns = parser.parse_args(list(argv))
    if ns.command == "consistency":
        from llm_methods.linguamap.analysis import detect_language

        texts = _read_answers(ns.answers, ns.field)
        langs = detect_language(texts)
        counts = {lang: langs.count(lang) for lang in sorted(set(langs))}
        share = counts.get(ns.expect, 0) / len(texts)
        print(f"{len(texts)} answers; detected {counts}; consistency ({ns.expect}) {share:.3f}")
        return 0
    from llm_methods.linguamap.analysis import cross_lingual_cosine
    from llm_methods.lm import load_lm

    parallel = _read_parallel(ns.parallel)
    lm = load_lm(ns.model, ns.device)
    cosine = cross_lingual_cosine(lm, parallel)
    print(f"{len(next(iter(parallel.values())))} parallel items, languages {sorted(parallel)}")
    for layer, value in enumerate(cosine):
        print(f"layer {layer:2d} (0 = embeddings): cosine {value:.4f}")
    return 0
