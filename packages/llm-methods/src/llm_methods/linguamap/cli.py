"""``llm-methods linguamap``: LinguaMap's measurements on your own outputs and models.

- ``consistency FILE --expect es``: language consistency of answers (one per line of a ``.txt``, or
  the ``--field`` of each ``.jsonl`` record) with the offline detector (py3langid), restricted to
  ``--languages`` (default en, es, de and the ``--expect`` language; any language py3langid
  knows).
- ``similarity --model SPEC --parallel FILE.jsonl``: per-layer cross-lingual cosine of hidden
  states mean-pooled over the text's own tokens (BOS / special tokens and padding left out;
  ``--skip-first`` also drops each text's first token); each record holds the same text in two or
  more languages (``{"en": ..., "es": ...}``).

The training experiment is ``iclr26 reproduce llm-methods.linguamap.selective_ft``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from iclr26_common.textio import input_file

ABOUT = "LinguaMap language control (arXiv 2601.20009): consistency and cross-lingual similarity"
PROG = "llm-methods linguamap"


def _read_answers(path: Path, field: str) -> list[str]:
    from llm_methods.jsonl import read_text
    from llm_methods.lm.errors import LMError

    input_file(path, error=LMError)
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

    input_file(path, error=LMError)
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
    from llm_methods.method_cli import ArgumentParser, out_args, seed_args, show_defaults

    parser = ArgumentParser(prog=PROG, description=ABOUT)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cons = sub.add_parser("consistency", help="share of answers detected in the expected language")
    cons.add_argument("answers", type=Path, help=".txt (one answer per line) or .jsonl")
    cons.add_argument(
        "--expect", required=True, help="ISO 639-1 code of the expected language (es, fr, ja, ...)"
    )
    cons.add_argument(
        "--languages",
        default=None,
        help="comma-separated codes the detector chooses among (default: en,es,de and --expect)",
    )
    cons.add_argument("--field", default="answer", help="jsonl field holding the answer")
    out_args(
        cons,
        "output .json file: counts, consistency and each answer's detected language",
        required=True,
        overwrite="replace an existing --out",
    )
    sim = sub.add_parser("similarity", help="per-layer cross-lingual cosine of a model")
    sim.add_argument("--model", required=True, help="model spec (smollm2, zoo:NAME, folder, .gguf)")
    sim.add_argument("--parallel", type=Path, required=True, help="jsonl: {lang: text, ...}")
    sim.add_argument("--device", default=None, help="cpu / cuda (default: cuda if present)")
    out_args(
        sim,
        "output .json file: the cosine of every layer",
        required=True,
        overwrite="replace an existing --out",
    )
    seed_args(sim)
    sim.add_argument(
        "--skip-first",
        action="store_true",
        help="also leave each text's first token out of the pooling (BOS is always left out)",
    )
    sim.add_argument(
        "--center",
        action="store_true",
        help="subtract each language's mean pooled vector before the cosine (removes the "
        "component all texts share; needs >= 2 items)",
    )
    ns = show_defaults(parser).parse_args(list(argv))
    from iclr26_common.outputs import check_out_file, write_text

    if ns.command == "consistency":
        from llm_methods.linguamap.analysis import known_languages
        from llm_methods.linguamap.data import LANGS

        known = known_languages()
        chosen = (
            [c.strip() for c in ns.languages.split(",") if c.strip()]
            if ns.languages
            else list(dict.fromkeys([*LANGS, ns.expect]))
        )
        for flag, codes in (("--expect", [ns.expect]), ("--languages", chosen)):
            bad = [c for c in codes if c not in known]
            if bad:
                parser.error(
                    f"{flag}: the detector does not know {', '.join(bad)} "
                    f"(it knows: {', '.join(known)})"
                )
        if ns.expect not in chosen:
            parser.error(f"--expect {ns.expect} is not among --languages {','.join(chosen)}")
        ns.languages = chosen

    check_out_file(ns.out, overwrite=ns.overwrite)  # before any file is read
    if ns.command == "consistency":
        from llm_methods.linguamap.analysis import detect_language

        texts = _read_answers(ns.answers, ns.field)
        langs = detect_language(texts, ns.languages)
        counts = {lang: langs.count(lang) for lang in sorted(set(langs))}
        share = counts.get(ns.expect, 0) / len(texts)
        record = {
            "answers": str(ns.answers),
            "field": ns.field,
            "expect": ns.expect,
            "detector_languages": ns.languages,
            "n": len(texts),
            "detected": counts,
            "consistency": share,
            "languages": langs,
        }
        write_text(ns.out, json.dumps(record, indent=1))
        print(f"{len(texts)} answers; detected {counts}; consistency ({ns.expect}) {share:.3f}")
        print(f"wrote {ns.out}")
        return 0
    from iclr26_common.seeding import seed_everything
    from llm_methods.linguamap.analysis import cross_lingual_cosine
    from llm_methods.lm import load_lm

    parallel = _read_parallel(ns.parallel)
    seed_everything(ns.seed)
    lm = load_lm(ns.model, ns.device)
    cosine = cross_lingual_cosine(
        lm, parallel, skip_first=ns.skip_first, quiet=ns.quiet, center=ns.center
    )
    n_items = len(next(iter(parallel.values())))
    record = {
        "model": lm.name,
        "parallel": str(ns.parallel),
        "languages": sorted(parallel),
        "n_items": n_items,
        "skip_first": ns.skip_first,
        "center": ns.center,
        "cosine": [float(v) for v in cosine],  # index 0: the embeddings, i: after layer i
    }
    write_text(ns.out, json.dumps(record, indent=1))
    print(f"{n_items} parallel items, languages {sorted(parallel)}")
    for layer, value in enumerate(cosine):
        print(f"layer {layer:2d} (0 = embeddings): cosine {value:.4f}")
    print(f"wrote {ns.out}")
    return 0
