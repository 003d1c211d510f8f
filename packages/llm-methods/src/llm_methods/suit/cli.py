"""``llm-methods suit``: locate-then-edit knowledge editing (ROME, MEMIT, AlphaEdit, SUIT).

Subcommands: ``edit`` (apply CounterFact / zsRE requests to a model, report the CounterFact
metrics and the general-ability probe before and after, save the edited FFN weights as
safetensors; C and P in the official AlphaEdit files, in and out), ``facts`` (probe a model
on the offline country table and write the facts it knows as CounterFact), ``synth`` (a synthetic
subject-relation-object world in CounterFact format).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from iclr26_common.cli_support import finite_float
from llm_methods.method_cli import ArgumentParser

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
    from safetensors.torch import save

    from iclr26_common.outputs import check_out_folder, write_bytes, write_text
    from iclr26_common.progress import progress
    from llm_methods.lm import load_lm
    from llm_methods.suit.data import read_requests
    from llm_methods.suit.editors import EditConfig, Editor
    from llm_methods.suit.experiment import (
        STATS_CHUNKS,
        STATS_LEN,
        ability_probe,
        stats_chunks,
        subject_basis,
    )
    from llm_methods.suit.keys import edit_weight, key_second_moments
    from llm_methods.suit.metrics import edit_metrics
    from llm_methods.suit.official_io import (
        PROJECTION_FILE,
        read_official_stats,
        read_projection,
        write_official_stats,
        write_projection,
    )

    if ns.export_stats and ns.import_stats is not None:  # type: ignore[attr-defined]
        raise ValueError("--export-stats writes the computed C; it cannot go with --import-stats")
    if ns.method not in ("alphaedit", "suit") and (ns.import_projection or ns.export_projection):  # type: ignore[attr-defined]
        raise ValueError(
            "--import-projection / --export-projection need --method alphaedit or suit"
        )
    out_folder = check_out_folder(ns.out, overwrite=ns.overwrite)  # type: ignore[attr-defined]
    requests = read_requests(ns.requests)  # type: ignore[attr-defined]
    lm = load_lm(ns.model, ns.device)  # type: ignore[attr-defined]
    cfg = EditConfig(
        steps=ns.steps,
        templates=("{}",),
        null_threshold=ns.null_threshold,  # type: ignore[attr-defined]
        clamp=ns.clamp,
        kl_factor=ns.kl_factor,
    )  # type: ignore[attr-defined]
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
    cfg = dataclasses.replace(
        cfg,
        layers=tuple(lm.layer_index(i) for i in cfg.layers),
        rome_layer=lm.layer_index(cfg.rome_layer),
    )
    dims = {i: edit_weight(lm, i).in_features for i in layers}
    out = out_folder.path
    if ns.import_stats is not None:  # type: ignore[attr-defined]
        stats = read_official_stats(ns.import_stats, layers, dims)  # type: ignore[attr-defined]
    else:
        chunks = stats_chunks(lm)
        stats = key_second_moments(lm, layers, chunks, f"pydoc{STATS_CHUNKS}x{STATS_LEN}")
    projectors = {}
    if ns.import_projection is not None:  # type: ignore[attr-defined]
        projectors = read_projection(ns.import_projection, cfg.layers, dims)  # type: ignore[attr-defined]
    basis = subject_basis(lm, cfg.layers, ns.subject_words, cfg.tau) if ns.method == "suit" else {}  # type: ignore[attr-defined]
    probe = ability_probe(lm)
    before, ability_before = edit_metrics(lm, requests), probe(lm)
    editor = Editor(lm, ns.method, cfg, stats, basis, projectors=projectors)  # type: ignore[attr-defined]
    starts = range(0, len(requests), ns.batch)  # type: ignore[attr-defined]
    for s in progress(starts, description="suit edit batches", quiet=ns.quiet):  # type: ignore[attr-defined]
        editor.edit(requests[s : s + ns.batch])  # type: ignore[attr-defined]
    after, ability_after = edit_metrics(lm, requests), probe(lm)
    with out_folder:  # marked partial until edit.json is written
        written = []
        if ns.export_stats:  # type: ignore[attr-defined]
            name = lm.model.config._name_or_path.rstrip("/").rsplit("/")[-1] or lm.name
            written += write_official_stats(
                out / "stats", name, "pydoc", stats, sum(len(c) for c in chunks), len(chunks)
            )
        if ns.export_projection:  # type: ignore[attr-defined]
            written.append(write_projection(out / PROJECTION_FILE, editor.projectors, cfg.layers))
        weights = {
            f"layers.{i}.down_proj.weight": edit_weight(lm, i).weight.detach().cpu().contiguous()
            for i in editor.layers
        }
        write_bytes(out / "edited_weights.safetensors", save(weights, metadata={"model": lm.name}))
        report = {
            "model": lm.name,
            "method": ns.method,
            "n_requests": len(requests),  # type: ignore[attr-defined]
            "layers": list(editor.layers),
            "before": before,
            "after": after,
            "config": {
                "null_threshold": cfg.null_threshold,
                "clamp": cfg.clamp,
                "kl_factor": cfg.kl_factor,
                "steps": cfg.steps,
            },
            "general_ability": {"before": ability_before, "after": ability_after},
            "files": [str(p) for p in written],
        }
        write_text(out / "edit.json", json.dumps(report, indent=1))
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
    edit.add_argument(
        "--null-threshold",
        type=finite_float,
        default=2e-2,
        help="AlphaEdit/SUIT: eigenvalues of C below this span the null space "
        "(official nullspace_threshold, absolute; default 2e-2)",
    )
    edit.add_argument(
        "--clamp",
        type=finite_float,
        default=0.75,
        help="MEMIT/AlphaEdit/SUIT: |delta| <= clamp * |h| (official "
        "clamp_norm_factor; default 0.75)",
    )
    edit.add_argument(
        "--kl-factor",
        type=finite_float,
        default=0.0625,
        help="weight of the KL term of the value loop (official kl_factor)",
    )
    edit.add_argument(
        "--import-stats",
        type=Path,
        default=None,
        help="read C from an official stats folder (layer_stats .npz: "
        "{model}/{ds}_stats/model.layers.{i}.mlp.down_proj_*_mom2*.npz)",
    )
    edit.add_argument(
        "--export-stats",
        action="store_true",
        help="write the computed C to OUT/stats/ in the official .npz layout",
    )
    edit.add_argument(
        "--import-projection",
        type=Path,
        default=None,
        help="AlphaEdit/SUIT: read P from an official null_space_project.pt "
        "([layers, d_ff, d_ff] in --layers order)",
    )
    edit.add_argument(
        "--export-projection",
        action="store_true",
        help="AlphaEdit/SUIT: write P to OUT/null_space_project.pt",
    )
    edit.add_argument("--device", default=None)
    edit.add_argument("--out", type=Path, required=True, help="output folder")
    edit.add_argument("--overwrite", action="store_true", help="replace earlier results in --out")
    edit.add_argument("--quiet", action="store_true", help="no progress lines")
    facts = sub.add_parser("facts", help="write the table facts a model knows as CounterFact")
    facts.add_argument("--model", default="smollm2")
    facts.add_argument("--device", default=None)
    facts.add_argument("--out", type=Path, required=True, help="output .json file")
    facts.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    facts.add_argument("--quiet", action="store_true", help="no progress line")
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
    if ns.command == "edit" and not (ns.null_threshold > 0 and ns.clamp > 0 and ns.kl_factor >= 0):
        parser.error("--null-threshold and --clamp must be > 0, --kl-factor >= 0")
    if ns.command == "trace" and (ns.facts < 1 or ns.samples < 1):
        parser.error("--facts and --samples must be >= 1")
    if ns.command == "trace":
        from llm_methods.lm import load_lm
        from llm_methods.suit.data import read_requests
        from llm_methods.suit.tracing import causal_trace, choose_rome_layer

        reqs = read_requests(ns.requests)[: ns.facts]
        lm = load_lm(ns.model, ns.device)
        result = causal_trace(
            lm,
            [r.prompt for r in reqs],
            [r.subject for r in reqs],
            samples=ns.samples,
            window=ns.window,
        )
        print(
            f"{result.n_facts} facts, window {result.window}: p(answer) clean "
            f"{result.p_clean:.3f}, corrupted {result.p_corrupted:.3f}"
        )
        for layer, aie in enumerate(result.aie):
            print(f"layer {layer:3d}  AIE {aie:+.4f}")
        print(f"ROME layer (max AIE, not the last): {choose_rome_layer(result, lm.n_layers)}")
    elif ns.command == "synth":
        from llm_methods.suit.data import synth_world, write_counterfact

        reqs = synth_world(ns.subjects, ns.seed)
        print(f"wrote {len(reqs)} requests to {write_counterfact(reqs, ns.out)}")
    elif ns.command == "facts":
        from iclr26_common.outputs import check_out_file
        from iclr26_common.progress import progress
        from llm_methods.lm import load_lm
        from llm_methods.suit.data import (
            RELATIONS,
            build_requests,
            fact_candidates,
            write_counterfact,
        )
        from llm_methods.suit.metrics import known_facts

        check_out_file(ns.out, overwrite=ns.overwrite)  # before the 220 s probe
        lm = load_lm(ns.model, ns.device)
        templates = {r: v[1] for r, v in RELATIONS.items()}
        candidates = fact_candidates()
        chunks = [candidates[i : i + 16] for i in range(0, len(candidates), 16)]
        known = [
            fact
            for chunk in progress(chunks, description="suit facts", quiet=ns.quiet)
            for fact in known_facts(lm, chunk, templates)
        ]
        reqs = build_requests(known)
        print(
            f"{len(known)} known facts; wrote {len(reqs)} requests to {write_counterfact(reqs, ns.out)}"
        )
    else:
        report = edit_main(ns)
        b, a = report["before"], report["after"]
        for key in ("efficacy", "generalization", "specificity", "S"):
            print(f"{key:>15}: {b[key]:6.1f} -> {a[key]:6.1f}")  # type: ignore[index]
        for key, value in report["general_ability"]["before"].items():  # type: ignore[index]
            print(f"{key:>15}: {value:6.2f} -> {report['general_ability']['after'][key]:6.2f}")  # type: ignore[index]
        print(f"wrote {ns.out / 'edit.json'} and {ns.out / 'edited_weights.safetensors'}")
    return 0
