"""``llm-methods suit``: locate-then-edit knowledge editing (ROME, MEMIT, AlphaEdit, SUIT).

Subcommands: ``edit`` (apply CounterFact / zsRE requests to a model, report the CounterFact
metrics before and after, save the edited FFN weights as safetensors), ``facts`` (probe a model
on the offline country table and write the facts it knows as CounterFact), ``synth`` (a synthetic
subject-relation-object world in CounterFact format).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from llm_methods.cliutils import ArgumentParser

__all__ = ["ABOUT", "main"]

ABOUT = "SUIT subspace knowledge editing + ROME/MEMIT/AlphaEdit (arXiv 2509.24502)"
PROG = "llm-methods suit"
TRACE_FACTS = 8  # facts traced for --rome-layer auto / trace (first N requests)


def _layers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError as error:
        raise ValueError(f"--layers must be comma-separated integers, got {text!r}") from error


def _rome_layer(text: str) -> str:
    if text != "auto" and not text.lstrip("-").isdigit():
        raise ValueError(f"--rome-layer must be an integer or 'auto', got {text!r}")
    return text


def edit_main(ns: object) -> dict[str, object]:
    import dataclasses

    import torch
    from safetensors.torch import save_file

    from llm_methods.lm import load_lm
    from llm_methods.suit.data import read_requests
    from llm_methods.suit.editors import EditConfig, Editor
    from llm_methods.suit.experiment import STATS_CHUNKS, STATS_LEN, stats_chunks, subject_basis
    from llm_methods.suit.keys import edit_weight, key_second_moments
    from llm_methods.suit.metrics import edit_metrics

    requests = read_requests(ns.requests)  # type: ignore[attr-defined]
    lm = load_lm(ns.model, ns.device)  # type: ignore[attr-defined]
    cfg = EditConfig(steps=ns.steps, templates=("{}",))  # type: ignore[attr-defined]
    if ns.layers:  # type: ignore[attr-defined]
        cfg = dataclasses.replace(cfg, layers=ns.layers, rome_layer=ns.layers[-1])  # type: ignore[attr-defined]
    rome_layer = getattr(ns, "rome_layer", None)
    if rome_layer == "auto":
        from llm_methods.suit.tracing import causal_trace, choose_rome_layer

        probe = requests[:TRACE_FACTS]
        trace = causal_trace(lm, [r.prompt for r in probe], [r.subject for r in probe])
        cfg = dataclasses.replace(cfg, rome_layer=choose_rome_layer(trace, lm.n_layers))
    elif rome_layer is not None:
        cfg = dataclasses.replace(cfg, rome_layer=int(rome_layer))
    layers = tuple(sorted({lm.layer_index(i) for i in (*cfg.layers, cfg.rome_layer)}))
    cfg = dataclasses.replace(cfg, layers=tuple(lm.layer_index(i) for i in cfg.layers),
                              rome_layer=lm.layer_index(cfg.rome_layer))  # fmt: skip
    for i in layers:
        edit_weight(lm, i)
    stats = key_second_moments(lm, layers, stats_chunks(lm), f"pydoc{STATS_CHUNKS}x{STATS_LEN}")
    basis = subject_basis(lm, cfg.layers, ns.subject_words, cfg.tau) if ns.method == "suit" else {}  # type: ignore[attr-defined]
    before = edit_metrics(lm, requests)
    editor = Editor(lm, ns.method, cfg, stats, basis)  # type: ignore[attr-defined]
    for s in range(0, len(requests), ns.batch):  # type: ignore[attr-defined]
        editor.edit(requests[s : s + ns.batch])  # type: ignore[attr-defined]
    after = edit_metrics(lm, requests)
    out = Path(ns.out)  # type: ignore[attr-defined]
    out.mkdir(parents=True, exist_ok=True)
    weights = {f"layers.{i}.down_proj.weight": edit_weight(lm, i).weight.detach().cpu().contiguous()
               for i in editor.layers}  # fmt: skip
    save_file(weights, str(out / "edited_weights.safetensors"), metadata={"model": lm.name})
    report = {"model": lm.name, "method": ns.method, "n_requests": len(requests),  # type: ignore[attr-defined]
              "layers": list(editor.layers), "before": before, "after": after}  # fmt: skip
    (out / "edit.json").write_text(json.dumps(report, indent=1))
    del torch
    return report


def main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    edit = sub.add_parser("edit", help="apply edit requests to a model and report metrics")
    edit.add_argument("--model", default="smollm2", help="model spec (default: smollm2)")
    edit.add_argument("--requests", type=Path, required=True, help="CounterFact or zsRE json/jsonl")
    edit.add_argument("--method", default="suit", choices=("rome", "memit", "alphaedit", "suit"))
    edit.add_argument("--layers", type=_layers, default=None, help="edit layers, e.g. 3,4,5,6")
    edit.add_argument(
        "--rome-layer",
        type=_rome_layer,
        default=None,
        help="ROME's layer: an index, or 'auto' = causal tracing on the first "
        f"{TRACE_FACTS} requests (default: the last of --layers, else 4)",
    )
    edit.add_argument("--batch", type=int, default=4, help="requests per sequential batch")
    edit.add_argument("--steps", type=int, default=10, help="value-optimisation steps")
    edit.add_argument("--subject-words", type=int, default=300, help="SUIT: words for U_m")
    edit.add_argument("--device", default=None)
    edit.add_argument("--out", type=Path, required=True, help="output folder")
    facts = sub.add_parser("facts", help="write the table facts a model knows as CounterFact")
    facts.add_argument("--model", default="smollm2")
    facts.add_argument("--device", default=None)
    facts.add_argument("--out", type=Path, required=True, help="output .json file")
    trace = sub.add_parser("trace", help="causal tracing: MLP indirect effect per layer (ROME)")
    trace.add_argument("--model", default="smollm2")
    trace.add_argument(
        "--requests", type=Path, required=True, help="CounterFact or zsRE json/jsonl"
    )
    trace.add_argument("--facts", type=int, default=TRACE_FACTS, help="requests traced (first N)")
    trace.add_argument("--samples", type=int, default=5, help="noise draws per fact")
    trace.add_argument("--window", type=int, default=None, help="restored layers (default n/5)")
    trace.add_argument("--device", default=None)
    synth = sub.add_parser("synth", help="a synthetic fact world as CounterFact")
    synth.add_argument("--subjects", type=int, default=24)
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--out", type=Path, required=True, help="output .json file")
    ns = parser.parse_args(list(argv))
    if ns.command == "edit" and (ns.batch < 1 or ns.steps < 1):
        parser.error("--batch and --steps must be >= 1")
    if ns.command == "trace" and (ns.facts < 1 or ns.samples < 1):
        parser.error("--facts and --samples must be >= 1")
    if ns.command == "trace":
        from llm_methods.lm import load_lm
        from llm_methods.suit.data import read_requests
        from llm_methods.suit.tracing import causal_trace, choose_rome_layer

        reqs = read_requests(ns.requests)[: ns.facts]
        lm = load_lm(ns.model, ns.device)
        result = causal_trace(lm, [r.prompt for r in reqs], [r.subject for r in reqs],
                              samples=ns.samples, window=ns.window)  # fmt: skip
        print(f"{result.n_facts} facts, window {result.window}: p(answer) clean "
              f"{result.p_clean:.3f}, corrupted {result.p_corrupted:.3f}")  # fmt: skip
        for layer, aie in enumerate(result.aie):
            print(f"layer {layer:3d}  AIE {aie:+.4f}")
        print(f"ROME layer (max AIE, not the last): {choose_rome_layer(result, lm.n_layers)}")
    elif ns.command == "synth":
        from llm_methods.suit.data import synth_world, write_counterfact

        reqs = synth_world(ns.subjects, ns.seed)
        print(f"wrote {len(reqs)} requests to {write_counterfact(reqs, ns.out)}")
    elif ns.command == "facts":
        from llm_methods.lm import load_lm
        from llm_methods.suit.data import (
            RELATIONS,
            build_requests,
            fact_candidates,
            write_counterfact,
        )
        from llm_methods.suit.metrics import known_facts

        lm = load_lm(ns.model, ns.device)
        known = known_facts(lm, fact_candidates(), {r: v[1] for r, v in RELATIONS.items()})
        reqs = build_requests(known)
        print(
            f"{len(known)} known facts; wrote {len(reqs)} requests to {write_counterfact(reqs, ns.out)}"
        )
    else:
        report = edit_main(ns)
        b, a = report["before"], report["after"]
        for key in ("efficacy", "generalization", "specificity", "S"):
            print(f"{key:>15}: {b[key]:6.1f} -> {a[key]:6.1f}")  # type: ignore[index]
        print(f"wrote {ns.out / 'edit.json'} and {ns.out / 'edited_weights.safetensors'}")
    return 0
