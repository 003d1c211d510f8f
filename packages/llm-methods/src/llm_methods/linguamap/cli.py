"""``llm-methods linguamap``: LinguaMap's measurements on your own outputs and models.

- ``consistency FILE --expect es``: language consistency of answers (one per line of a ``.txt``, or
  the ``--field`` of each ``.jsonl`` record) with the offline detector (py3langid), restricted to
  ``--languages`` (default en, es, de and the ``--expect`` language; any language py3langid
  knows). The output's ``items`` give each answer's detected language with its line and the
  record's own id (``--id-field``, default ``id``; null where a record has none).
- ``similarity --model SPEC --parallel FILE.jsonl``: per-layer cross-lingual cosine of hidden
  states mean-pooled over the text's own tokens (BOS / special tokens and padding left out;
  ``--skip-first`` also drops each text's first token); each record holds the same text in two or
  more languages (``{"en": ..., "es": ...}``).
- ``finetune --model SPEC --data FILE.jsonl --last-k K --out FOLDER``: selective fine-tuning
  (:mod:`llm_methods.linguamap.finetune`): only the last K decoder layers (or ``--layers``) train,
  the loss on each record's ``answer`` tokens given its ``prompt``; FOLDER receives the
  fine-tuned model (HF folder: ``--model FOLDER`` works in every command) and
  ``linguamap_finetune.json`` (layers, trained fraction, losses).

The training experiment is ``iclr26 reproduce llm-methods.linguamap.selective_ft``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_common.device import add_device_option
from iclr26_common.textio import input_file

ABOUT = (
    "LinguaMap language control (arXiv 2601.20009): consistency, cross-lingual similarity, "
    "selective fine-tuning"
)
PROG = "llm-methods linguamap"


def _read_answers(
    path: Path, field: str, id_field: str = "id"
) -> tuple[list[str], list[int], list[str | int | None]]:
    """(texts, line numbers, ids): each answer with its 1-based line in ``path`` and, for a
    ``.jsonl`` record, the value of its ``id_field`` (None where the record has none; a ``.txt``
    has no ids)."""
    from llm_methods.jsonl import read_text
    from llm_methods.lm.errors import LMError

    input_file(path, error=LMError)
    lines = read_text(path).splitlines()
    texts: list[str] = []
    numbers: list[int] = []
    ids: list[str | int | None] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if path.suffix != ".jsonl":
            texts.append(line)
            numbers.append(number)
            ids.append(None)
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise LMError(f"{path}:{number}: not JSON ({error.msg})") from error
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise LMError(f"{path}:{number}: field {field!r} missing or not a string")
        rid = record.get(id_field)
        if rid is not None and (isinstance(rid, bool) or not isinstance(rid, str | int)):
            raise LMError(f"{path}:{number}: field {id_field!r} is not a string or an integer")
        texts.append(record[field])
        numbers.append(number)
        ids.append(rid)
    if not texts:
        raise LMError(f"{path}: no answers")
    return texts, numbers, ids


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
    cons.add_argument(
        "--id-field",
        default="id",
        help="jsonl field holding each record's id, copied to the output's items (optional)",
    )
    out_args(
        cons,
        "output .json file: counts, consistency and each answer's id, line and detected language",
        required=True,
        overwrite="replace an existing --out",
    )
    sim = sub.add_parser("similarity", help="per-layer cross-lingual cosine of a model")
    sim.add_argument("--model", required=True, help="model spec (smollm2, zoo:NAME, folder, .gguf)")
    sim.add_argument("--parallel", type=Path, required=True, help="jsonl: {lang: text, ...}")
    add_device_option(sim)
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
    _finetune_args(sub)
    ns = show_defaults(parser).parse_args(list(argv))
    if ns.command == "finetune":
        return _finetune(ns)
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

        texts, numbers, ids = _read_answers(ns.answers, ns.field, ns.id_field)
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
            "languages": langs,  # by position (as before); items carry the ids
            "items": [
                {"id": rid, "line": number, "language": lang}
                for rid, number, lang in zip(ids, numbers, langs, strict=True)
            ],
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


def _finetune_args(sub: Any) -> None:
    from iclr26_common.cli_support import comma_list_of, positive_float, positive_int
    from llm_methods.method_cli import out_args, seed_args

    ft = sub.add_parser(
        "finetune",
        help="selective fine-tuning: train only the last k layers on prompt/answer records",
        description="Train only the last K decoder layers (or --layers) of a causal LM on "
        "language-consistent examples, the loss on the answer tokens (LinguaMap's selective "
        "fine-tuning). Pick K from the logit-lens diagnosis: the layers from the one where the "
        "output language settles on (linguamap.analysis.decision_layer).",
    )
    ft.add_argument("--model", required=True, help="model spec (smollm2, zoo:NAME, folder, .gguf)")
    ft.add_argument(
        "--data",
        type=Path,
        required=True,
        help='jsonl: {"prompt": ..., "answer": ...} per line (the loss is on the answer)',
    )
    which = ft.add_mutually_exclusive_group(required=True)
    which.add_argument("--last-k", type=positive_int, help="train the last K decoder layers")
    which.add_argument(
        "--layers",
        type=comma_list_of(int),
        help="train these decoder layers (comma-separated; negative counts from the end)",
    )
    ft.add_argument("--steps", type=positive_int, default=150, help="optimizer steps")
    ft.add_argument("--lr", type=positive_float, default=2e-3, help="peak learning rate (AdamW)")
    ft.add_argument("--batch-size", type=positive_int, default=16, help="examples per step")
    ft.add_argument(
        "--max-len", type=positive_int, default=256, help="tokens per example (prompt + answer)"
    )
    ft.add_argument("--prompt-field", default="prompt", help="jsonl field of the prompt")
    ft.add_argument("--answer-field", default="answer", help="jsonl field of the answer")
    add_device_option(ft)
    out_args(
        ft,
        "output folder: the fine-tuned model (HF folder) and linguamap_finetune.json",
        required=True,
    )
    seed_args(ft)


def _finetune(ns: Any) -> int:
    from iclr26_common.outputs import check_out_folder, publish, write_text
    from iclr26_common.seeding import seed_everything
    from llm_methods.linguamap.finetune import (
        answer_masked_rows,
        last_layers,
        read_pairs,
        selective_finetune,
    )
    from llm_methods.lm import load_lm
    from llm_methods.lm.errors import LMError
    from llm_methods.lm.loading import resolve_device

    out = check_out_folder(ns.out, overwrite=ns.overwrite, resumable=False)  # before any work
    resolve_device(ns.device)  # a bad --device before the data and the model
    pairs = read_pairs(ns.data, ns.prompt_field, ns.answer_field)
    seed_everything(ns.seed)
    lm = load_lm(ns.model, ns.device, "float32")
    layers = last_layers(lm.n_layers, ns.last_k) if ns.last_k else ns.layers
    layers = sorted({lm.layer_index(i) for i in layers})
    rows, masks, cut = answer_masked_rows(lm.tokenizer, pairs, ns.max_len)
    if not any(any(m) for m in masks):
        raise LMError(f"{ns.data}: no answer token fits in --max-len {ns.max_len}")
    print(
        f"{lm.name}: training layers {layers} of {lm.n_layers} on {len(rows)} examples "
        f"({cut} cut at --max-len {ns.max_len}), {ns.steps} steps",
        flush=True,
    )
    with out:
        result = selective_finetune(
            lm,
            rows,
            masks,
            layers,
            steps=ns.steps,
            lr=ns.lr,
            batch_size=ns.batch_size,
            seed=ns.seed,
            quiet=ns.quiet,
        )
        record = {
            "model": lm.name,
            "data": str(ns.data),
            "n_examples": len(rows),
            "cut_at_max_len": cut,
            "layers": result.layers,
            "n_layers": lm.n_layers,
            "trainable_parameters": result.trainable,
            "total_parameters": result.total,
            "trained_fraction": result.fraction,
            "steps": ns.steps,
            "lr": ns.lr,
            "batch_size": ns.batch_size,
            "max_len": ns.max_len,
            "seed": ns.seed,
            "loss_first": result.losses[0],
            "loss_last": result.losses[-1],
            "losses": result.losses,
        }
        for p in lm.model.parameters():
            p.requires_grad_(True)
        lm.model.save_pretrained(out.path)
        lm.tokenizer.save_pretrained(out.path)
        publish(out.path)  # safetensors writes its weights 0600
        write_text(out.path / "linguamap_finetune.json", json.dumps(record, indent=1))
    print(
        f"trained {100 * result.fraction:.1f} % of the parameters; answer-token loss "
        f"{result.losses[0]:.3f} -> {result.losses[-1]:.3f}"
    )
    print(f"wrote {ns.out}")
    return 0
