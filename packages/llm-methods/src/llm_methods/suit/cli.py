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
from types import SimpleNamespace
from typing import Any

from iclr26_common.cli_support import finite_float
from iclr26_common.device import add_device_option
from llm_methods.method_cli import ArgumentParser, out_args

__all__ = ["ABOUT", "main"]

ABOUT = "SUIT subspace knowledge editing + ROME/MEMIT/AlphaEdit (arXiv 2509.24502)"
PROG = "llm-methods suit"
TRACE_FACTS = 8  # facts traced for --rome-layer auto / trace (first N requests)
METRIC_KEYS = ("efficacy", "generalization", "specificity")


def _layers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError as error:
        raise ValueError(f"--layers must be comma-separated integers, got {text!r}") from error


def _facts_partial(ns: Any) -> Any:
    """``suit facts``' folder of finished chunks, ``OUT.partial/`` (an
    :class:`iclr26_common.outputs.OutputFolder`: an interrupted probe is continued with
    ``--resume``, started again with ``--overwrite``), checked before any work."""
    import shutil

    from iclr26_common.outputs import check_output_options

    path = Path(f"{ns.out}.partial")
    folder = check_output_options(ns, path=path)
    if ns.overwrite and not folder.resumed and path.is_dir():
        shutil.rmtree(path)  # --overwrite starts again
        folder.created = True
    return folder


#: ``suit facts``' settings that are no option: this version's candidate facts and chunk size.
FACTS_OPTIONS = {"candidates": "candidate facts", "chunk": "facts per chunk"}


def _facts_done(partial: Any, settings: dict[str, Any]) -> dict[int, list[list[str]]]:
    """``{chunk number: known facts}`` that an interrupted ``suit facts`` with the same
    ``settings`` left in ``partial`` (nothing when not resumed); records ``settings`` there."""
    from iclr26_common.outputs import check_resume_settings, record_settings

    path = partial.path / "settings.json"
    done: dict[int, list[list[str]]] = {}
    if partial.resumed:
        check_resume_settings(path, settings, "suit facts probe", options=FACTS_OPTIONS)
        for chunk in sorted(partial.path.glob("chunk-*.json")):
            try:
                done[int(chunk.stem.split("-")[1])] = json.loads(chunk.read_text("utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue  # a chunk cut off by the interruption: probed again
    record_settings(path, settings)
    return done


def _rome_layer(text: str) -> str:
    if text != "auto" and not text.lstrip("-").isdigit():
        raise ValueError(f"--rome-layer must be an integer or 'auto', got {text!r}")
    return text


def edit_config(ns: Any) -> Any:
    """The :class:`~llm_methods.suit.editors.EditConfig` of ``suit edit``'s options: EditConfig's
    defaults for every value not given (one definition). ``--layers`` sets MEMIT / AlphaEdit /
    SUIT's layers only: ROME's layer is its own setting (``--rome-layer``; default
    ``EditConfig.rome_layer``), as the official code keeps it in its own ``hparams/ROME`` file
    (AlphaEdit's ``ROME/Llama3-8B.json``: layer 5, inside AlphaEdit's layers 4-8).
    ``--rome-layer auto`` is resolved later, by causal tracing on the loaded model."""
    import dataclasses

    from llm_methods.suit.editors import EditConfig

    cfg = EditConfig(
        steps=ns.steps,
        null_threshold=ns.null_threshold,
        clamp=ns.clamp,
        kl_factor=ns.kl_factor,
        seed=ns.seed,
    )
    if ns.one_template:
        cfg = dataclasses.replace(cfg, templates=("{}",))
    if ns.layers:
        cfg = dataclasses.replace(cfg, layers=ns.layers)
    rome_layer = getattr(ns, "rome_layer", None)
    if rome_layer not in (None, "auto"):
        cfg = dataclasses.replace(cfg, rome_layer=int(rome_layer))
    return cfg


def edit_main(ns: object) -> dict[str, object]:
    import dataclasses

    import torch
    from safetensors.torch import save

    from iclr26_common.outputs import check_output_options, publish, write_bytes, write_text
    from iclr26_common.seeding import seed_everything
    from llm_methods.lm import load_lm
    from llm_methods.suit.data import read_requests
    from llm_methods.suit.editors import Editor
    from llm_methods.suit.experiment import (
        STATS_CHUNKS,
        STATS_LEN,
        ability_probe,
        stats_chunks,
        subject_basis,
    )
    from llm_methods.suit.keys import edit_weight, key_second_moments
    from llm_methods.suit.metrics import score_requests
    from llm_methods.suit.official_io import (
        PROJECTION_FILE,
        read_official_stats,
        read_projection,
        write_official_stats,
        write_projection,
    )
    from llm_methods.suit.weights import WEIGHTS_FILE, edited_state

    if ns.export_stats and ns.import_stats is not None:  # type: ignore[attr-defined]
        raise ValueError("--export-stats writes the computed C; it cannot go with --import-stats")
    if ns.method not in ("alphaedit", "suit") and (ns.import_projection or ns.export_projection):  # type: ignore[attr-defined]
        raise ValueError(
            "--import-projection / --export-projection need --method alphaedit or suit"
        )
    out_folder = check_output_options(ns)
    requests = read_requests(ns.requests, ns.zsre_target)  # type: ignore[attr-defined]
    seed_everything(ns.seed)  # type: ignore[attr-defined]
    lm = load_lm(ns.model, ns.device)  # type: ignore[attr-defined]
    cfg = edit_config(ns)
    if getattr(ns, "rome_layer", None) == "auto":
        from llm_methods.suit.tracing import causal_trace, choose_rome_layer

        probe = requests[:TRACE_FACTS]
        trace = causal_trace(
            lm,
            [r.prompt for r in probe],
            [r.subject for r in probe],
            seed=ns.seed,  # type: ignore[attr-defined]
            quiet=ns.quiet,  # type: ignore[attr-defined]
        )
        cfg = dataclasses.replace(cfg, rome_layer=choose_rome_layer(trace, lm.n_layers))
    # the layers this method edits: ROME its own layer, the others --layers (each checked
    # against the model only where it is used: a 3-layer model takes --method memit --layers 0,1)
    if ns.method == "rome":  # type: ignore[attr-defined]
        cfg = dataclasses.replace(cfg, rome_layer=lm.layer_index(cfg.rome_layer))
        layers: tuple[int, ...] = (cfg.rome_layer,)
    else:
        cfg = dataclasses.replace(cfg, layers=tuple(lm.layer_index(i) for i in cfg.layers))
        layers = tuple(sorted(set(cfg.layers)))
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
    (before, rows_before), ability_before = score_requests(lm, requests), probe(lm)
    editor = Editor(lm, ns.method, cfg, stats, basis, projectors=projectors)  # type: ignore[attr-defined]
    with out_folder:  # marked partial until edit.json is written; finished batches kept in it
        _edit_batches(editor, requests, ns, out_folder)
        (after, rows_after), ability_after = score_requests(lm, requests), probe(lm)
        written = []
        if ns.export_stats:  # type: ignore[attr-defined]
            name = lm.model.config._name_or_path.rstrip("/").rsplit("/")[-1] or lm.name
            written += write_official_stats(
                out / "stats", name, "pydoc", stats, sum(len(c) for c in chunks), len(chunks)
            )
        if ns.export_projection:  # type: ignore[attr-defined]
            written.append(write_projection(out / PROJECTION_FILE, editor.projectors, cfg.layers))
        # HF parameter names (model.layers.{i}.mlp.down_proj.weight): suit.weights.load_edited
        # applies them onto the base spec recorded here
        weights = edited_state(lm, editor.layers)
        meta = {"model": lm.name, "base_spec": str(ns.model), "method": ns.method}  # type: ignore[attr-defined]
        write_bytes(out / WEIGHTS_FILE, save(weights, metadata=meta))
        if ns.save_model:  # type: ignore[attr-defined]
            lm.model.save_pretrained(out / "model")
            lm.tokenizer.save_pretrained(out / "model")
            written.append(publish(out / "model"))  # safetensors writes its weights 0600
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
                "templates": list(cfg.templates),
                "seed": cfg.seed,
            },
            "general_ability": {"before": ability_before, "after": ability_after},
            "files": [str(p) for p in written],
            "weights": {"file": WEIGHTS_FILE, "parameters": sorted(weights)},
            "requests": [
                {
                    **{k: v for k, v in b.items() if k not in METRIC_KEYS},
                    "before": {k: b[k] for k in METRIC_KEYS},
                    "after": {k: a[k] for k in METRIC_KEYS},
                }
                for b, a in zip(rows_before, rows_after, strict=True)
            ],
        }
        write_text(out / "edit.json", json.dumps(report, indent=1))
        (out / EDIT_STATE).unlink(missing_ok=True)  # edit.json is written: nothing to resume
    del torch
    return report


#: ``suit edit``'s finished batches in ``--out`` until ``edit.json`` is written: the edited
#: weights, AlphaEdit/SUIT's cache of earlier keys, and (metadata) the batches done and the
#: settings, in one file written atomically after each batch (``--resume`` continues from it).
EDIT_STATE = "edit-state.safetensors"


def _edit_settings(editor: Any, requests: Sequence[Any], ns: Any) -> dict[str, Any]:
    """What ``suit edit``'s result depends on (``--resume`` refuses other values)."""
    import dataclasses

    names = ("model", "method", "batch", "subject_words", "import_stats", "import_projection")
    settings: dict[str, Any] = {name: str(getattr(ns, name, None)) for name in names}
    settings["zsre_target"] = str(getattr(ns, "zsre_target", None))
    settings["requests"] = str(Path(ns.requests).resolve())
    settings["n_requests"] = len(requests)
    settings["layers"] = list(editor.layers)
    settings["config"] = dataclasses.asdict(editor.cfg)
    return json.loads(json.dumps(settings))


def _edit_batches(editor: Any, requests: Sequence[Any], ns: Any, out_folder: Any) -> None:
    """``editor.edit`` on ``requests`` in batches of ``--batch``, with progress lines; after
    each batch its state goes into :data:`EDIT_STATE` in ``out_folder``. A resumed folder's
    state (same settings, else one line naming them) is loaded and its batches skipped."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save

    from iclr26_common.cli_support import UsageError
    from iclr26_common.outputs import compare_settings, write_bytes
    from iclr26_common.progress import progress
    from llm_methods.suit.keys import edit_weight

    path = out_folder.path / EDIT_STATE
    settings = _edit_settings(editor, requests, ns)
    done = 0
    if out_folder.resumed:
        if not path.is_file():
            raise UsageError(
                f"--resume: {out_folder.path} holds no finished batch of `suit edit`; pass "
                "--overwrite to start again"
            )
        with safe_open(str(path), framework="pt") as state:
            meta = state.metadata() or {}
            earlier = json.loads(meta.get("settings", "{}"))
            options = {k: f"--{k.replace('_', '-')}" for k in settings}
            options |= {"config": "the edit settings", "n_requests": "requests in --requests"}
            compare_settings(earlier, settings, "suit edit", path, options=options)
            with torch.no_grad():
                for layer in editor.layers:
                    weight = edit_weight(editor.lm, layer).weight
                    weight.copy_(state.get_tensor(f"weight.{layer}").to(weight))
                for layer in list(editor.cache_c):
                    c = editor.cache_c[layer]
                    editor.cache_c[layer] = state.get_tensor(f"cache_c.{layer}").to(c)
            done, editor.n_edits = int(meta["batches"]), int(meta["n_edits"])
    starts = list(range(0, len(requests), ns.batch))
    for number in progress(range(len(starts)), description="suit edit batches", quiet=ns.quiet):
        if number < done:
            continue
        editor.edit(requests[starts[number] : starts[number] + ns.batch])
        tensors = {
            f"weight.{layer}": edit_weight(editor.lm, layer).weight.detach().cpu().contiguous()
            for layer in editor.layers
        }
        for layer, c in editor.cache_c.items():
            tensors[f"cache_c.{layer}"] = c.detach().cpu().contiguous()
        meta = {"settings": json.dumps(settings), "batches": str(number + 1)}
        write_bytes(path, save(tensors, metadata={**meta, "n_edits": str(editor.n_edits)}))


def _edit_defaults(argv: Sequence[str]) -> Any:
    """``EditConfig()``, the one definition of ``suit edit``'s defaults, when ``argv`` runs
    ``edit`` (or shows its help); otherwise a stand-in (no torch import for the other commands)."""
    if list(argv[:1]) == ["edit"]:
        from llm_methods.suit.editors import EditConfig

        return EditConfig()
    return _STANDIN


#: what the parser of the commands other than ``edit`` is built with (never shown)
_STANDIN = SimpleNamespace(
    layers=(), rome_layer=0, steps=1, templates=(), null_threshold=1.0, clamp=1.0, kl_factor=0.0
)


def main(argv: Sequence[str]) -> int:
    from llm_methods.method_cli import seed_args, show_defaults

    defaults = _edit_defaults(argv)
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    edit = sub.add_parser("edit", help="apply edit requests to a model and report metrics")
    edit.add_argument("--model", default="smollm2", help="model spec (default: smollm2)")
    edit.add_argument("--requests", type=Path, required=True, help="CounterFact or zsRE json/jsonl")
    edit.add_argument("--method", default="suit", choices=("rome", "memit", "alphaedit", "suit"))
    edit.add_argument(
        "--layers",
        type=_layers,
        default=None,
        help="edit layers, e.g. 3,4,5,6 (default: EditConfig's "
        f"{','.join(str(i) for i in defaults.layers)})",
    )
    edit.add_argument(
        "--rome-layer",
        type=_rome_layer,
        default=None,
        help="ROME's layer: an index, or 'auto' = causal tracing on the first "
        f"{TRACE_FACTS} requests (default: EditConfig's {defaults.rome_layer}, whatever --layers "
        "is: ROME's layer is its own setting, as in the official hparams/ROME files)",
    )
    edit.add_argument("--batch", type=int, default=4, help="requests per sequential batch")
    edit.add_argument(
        "--steps", type=int, default=defaults.steps, help="value-optimisation steps (EditConfig)"
    )
    edit.add_argument(
        "--one-template",
        action="store_true",
        help="optimise the value on the prompt alone (the experiments' setting) instead of "
        f"EditConfig's {len(defaults.templates)} context templates",
    )
    edit.add_argument("--subject-words", type=int, default=300, help="SUIT: words for U_m")
    edit.add_argument(
        "--null-threshold",
        type=finite_float,
        default=defaults.null_threshold,
        help="AlphaEdit/SUIT: eigenvalues of C below this span the null space "
        "(official nullspace_threshold, absolute)",
    )
    edit.add_argument(
        "--clamp",
        type=finite_float,
        default=defaults.clamp,
        help="MEMIT/AlphaEdit/SUIT: |delta| <= clamp * |h| (official clamp_norm_factor)",
    )
    edit.add_argument(
        "--kl-factor",
        type=finite_float,
        default=defaults.kl_factor,
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
    edit.add_argument(
        "--zsre-target",
        default="answers",
        choices=("alt", "answers"),  # data.ZSRE_TARGETS (not imported: numpy at --help)
        help="zsRE files: edit towards 'answers' (answers[0], as ROME / MEMIT / AlphaEdit's "
        "MENDQADataset, the official target) or 'alt' (MEND / EasyEdit's new answer) "
        "(default: answers)",
    )
    edit.add_argument(
        "--save-model",
        action="store_true",
        help="also write OUT/model, a full HF folder of the edited model (any --model takes it)",
    )
    add_device_option(edit)
    out_args(edit, "output folder", required=True, resumable=True)
    seed_args(edit)
    facts = sub.add_parser("facts", help="write the table facts a model knows as CounterFact")
    facts.add_argument("--model", default="smollm2", help="model spec")
    add_device_option(facts)
    out_args(
        facts,
        "output .json file (an interrupted probe keeps its finished chunks in OUT.partial/)",
        required=True,
        kind="file",
        resumable=True,
    )
    seed_args(facts)
    trace = sub.add_parser("trace", help="causal tracing: MLP indirect effect per layer (ROME)")
    trace.add_argument("--model", default="smollm2", help="model spec")
    trace.add_argument(
        "--requests", type=Path, required=True, help="CounterFact or zsRE json/jsonl"
    )
    trace.add_argument("--facts", type=int, default=TRACE_FACTS, help="requests traced (first N)")
    trace.add_argument("--samples", type=int, default=5, help="noise draws per fact")
    trace.add_argument("--window", type=int, default=None, help="restored layers (default n/5)")
    add_device_option(trace)
    out_args(
        trace,
        "output .json file (the numbers printed)",
        required=True,
        kind="file",
    )
    seed_args(trace)
    synth = sub.add_parser("synth", help="a synthetic fact world as CounterFact")
    synth.add_argument("--subjects", type=int, default=24, help="subjects")
    seed_args(synth, quiet=False)
    out_args(synth, "output .json file", required=True, kind="file")
    ns = show_defaults(parser).parse_args(list(argv))
    if ns.command == "edit" and (ns.batch < 1 or ns.steps < 1):
        parser.error("--batch and --steps must be >= 1")
    if ns.command == "edit" and not (ns.null_threshold > 0 and ns.clamp > 0 and ns.kl_factor >= 0):
        parser.error("--null-threshold and --clamp must be > 0, --kl-factor >= 0")
    if ns.command == "trace" and (ns.facts < 1 or ns.samples < 1):
        parser.error("--facts and --samples must be >= 1")
    if ns.command == "trace":
        from iclr26_common.outputs import check_output_options, write_text
        from iclr26_common.seeding import seed_everything
        from llm_methods.lm import load_lm
        from llm_methods.suit.data import read_requests
        from llm_methods.suit.tracing import causal_trace, choose_rome_layer

        check_output_options(ns, kind="file")  # before the model is loaded
        reqs = read_requests(ns.requests)[: ns.facts]
        seed_everything(ns.seed)
        lm = load_lm(ns.model, ns.device)
        result = causal_trace(
            lm,
            [r.prompt for r in reqs],
            [r.subject for r in reqs],
            samples=ns.samples,
            window=ns.window,
            seed=ns.seed,
            quiet=ns.quiet,
        )
        rome_layer = choose_rome_layer(result, lm.n_layers)
        record = {
            "model": lm.name,
            "requests": str(ns.requests),
            "seed": ns.seed,
            "samples": ns.samples,
            "n_facts": result.n_facts,
            "window": result.window,
            "p_clean": result.p_clean,
            "p_corrupted": result.p_corrupted,
            "aie": list(result.aie),
            "rome_layer": rome_layer,
        }
        write_text(ns.out, json.dumps(record, indent=1))
        print(
            f"{result.n_facts} facts, window {result.window}: p(answer) clean "
            f"{result.p_clean:.3f}, corrupted {result.p_corrupted:.3f}"
        )
        for layer, aie in enumerate(result.aie):
            print(f"layer {layer:3d}  AIE {aie:+.4f}")
        print(f"ROME layer (max AIE, not the last): {rome_layer}")
        print(f"wrote {ns.out}")
    elif ns.command == "synth":
        from iclr26_common.outputs import check_output_options
        from llm_methods.suit.data import synth_world, write_counterfact

        check_output_options(ns, kind="file")
        reqs = synth_world(ns.subjects, ns.seed)
        print(f"wrote {len(reqs)} requests to {write_counterfact(reqs, ns.out)}")
    elif ns.command == "facts":
        import shutil

        from iclr26_common.outputs import check_output_options, write_text
        from iclr26_common.progress import progress
        from iclr26_common.seeding import seed_everything
        from llm_methods.lm import load_lm
        from llm_methods.suit.data import (
            RELATIONS,
            build_requests,
            fact_candidates,
            write_counterfact,
        )
        from llm_methods.suit.metrics import known_facts

        check_output_options(ns, kind="file")  # before the 220 s probe
        partial = _facts_partial(ns)
        seed_everything(ns.seed)
        lm = load_lm(ns.model, ns.device)
        templates = {r: v[1] for r, v in RELATIONS.items()}
        candidates = fact_candidates()
        chunks = [candidates[i : i + 16] for i in range(0, len(candidates), 16)]
        known = []
        with partial:  # each finished chunk's known facts kept in OUT.partial/ until OUT is written
            settings = {"model": ns.model, "candidates": len(candidates), "chunk": 16}
            done = _facts_done(partial, settings)
            for number, chunk in enumerate(
                progress(chunks, description="suit facts", quiet=ns.quiet)
            ):
                if number in done:
                    found = done[number]
                else:
                    found = known_facts(lm, chunk, templates)
                    write_text(partial.path / f"chunk-{number:04d}.json", json.dumps(found))
                known += [tuple(fact) for fact in found]
        reqs = build_requests(known, seed=ns.seed)
        written = write_counterfact(reqs, ns.out)
        shutil.rmtree(partial.path, ignore_errors=True)  # OUT is complete
        print(f"{len(known)} known facts; wrote {len(reqs)} requests to {written}")
    else:
        report = edit_main(ns)
        b, a = report["before"], report["after"]
        for key in ("efficacy", "generalization", "specificity", "S"):
            print(f"{key:>15}: {b[key]:6.1f} -> {a[key]:6.1f}")  # type: ignore[index]
        for key, value in report["general_ability"]["before"].items():  # type: ignore[index]
            print(f"{key:>15}: {value:6.2f} -> {report['general_ability']['after'][key]:6.2f}")  # type: ignore[index]
        model_note = (
            f"; the edited model: --model {ns.out / 'model'}"
            if ns.save_model
            else " (llm_methods.suit.load_edited(OUT) applies them to the base model; "
            "--save-model writes a full HF folder)"
        )
        print(
            f"wrote {ns.out / 'edit.json'} and {ns.out / 'edited_weights.safetensors'}{model_note}"
        )
    return 0
