"""The promises every ``llm-methods`` command keeps (issue 37), through the CLI in-process:
outputs checked before any work, one-line errors naming the file / option, Ctrl-C in one line,
progress with ``--quiet``, one ``--model`` flag. Every test here but the Ctrl-C guard fails on
11b2942 (each docstring says how)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from iclr26_common.testing import assert_one_line_error, run_main
from llm_methods.cli import main

NOT_UTF8 = b"\xff\xfe not utf-8 \xe9\n"


def _bad_out(tmp_path: Path) -> Path:
    path = tmp_path / "outfile.txt"
    path.write_text("x")
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["ltpo", "solve", "--model", "no-such-model", "--data", "missing.jsonl"],
        ["suit", "edit", "--model", "no-such-model", "--requests", "missing.json"],
        ["perk", "eval", "--model", "missing.ckpt", "--data", "missing.jsonl"],
        ["meta_router", "fit", "--gold", "missing.csv", "--strong", "a", "--weak", "b"],
        ["adl", "kl", "--base-model", "nope", "--model", "nope", "--texts", "missing.txt"],
        ["adl", "diff", "--base-model", "nope", "--model", "nope", "--texts", "missing.txt"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_out_is_checked_before_any_work(command: list[str], tmp_path: Path, capsys: Any) -> None:
    """``--out`` naming a file where a folder is wanted is refused first, in one line naming the
    option and what it must be (on 11b2942 the missing input / model was reported first, or the
    work ran and ``mkdir`` failed with ``[Errno 17] File exists``)."""
    out = _bad_out(tmp_path)
    line = assert_one_line_error(main, [*command, "--out", str(out)], capsys)
    assert f"--out {out}: exists and is a file; give a folder" in line, line


def test_a_folder_with_earlier_results_is_refused_unless_overwrite(
    tmp_path: Path, capsys: Any
) -> None:
    """A folder holding earlier results is refused before the model is looked at (11b2942
    wrote over it after solving); ``--overwrite`` gets past the check."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    base = ["ltpo", "solve", "--model", "no-such-model", "--data", "missing.jsonl"]
    line = assert_one_line_error(main, [*base, "--out", str(out)], capsys)
    assert "holds earlier results; pass --overwrite" in line, line
    line = assert_one_line_error(main, [*base, "--out", str(out), "--overwrite"], capsys)
    assert "--out" not in line and "missing.jsonl" in line, line
    assert (out / "summary.json").read_text() == "{}"


@pytest.mark.parametrize(
    "command",
    [
        ["meta_router", "route", "--router", "missing.joblib", "--queries", "missing.csv"],
        ["suit", "facts", "--model", "no-such-model"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_an_existing_out_file_is_refused_first(
    command: list[str], tmp_path: Path, capsys: Any
) -> None:
    """An existing output file is refused before any work unless ``--overwrite`` (11b2942
    reported the missing input first, or replaced the file after the work)."""
    out = _bad_out(tmp_path)
    line = assert_one_line_error(main, [*command, "--out", str(out)], capsys)
    assert f"--out {out}: exists; pass --overwrite" in line, line


def _not_utf8(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(NOT_UTF8)
    return path


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("bad.jsonl", ["dispersion", "measure", "--model", "nope", "--input", "{}"]),
        ("bad.jsonl", ["adl", "kl", "--base-model", "nope", "--model", "nope", "--texts", "{}"]),
        ("bad.txt", ["linguamap", "consistency", "{}", "--expect", "en"]),
        ("bad.jsonl", ["linguamap", "similarity", "--model", "nope", "--parallel", "{}"]),
        ("bad.json", ["suit", "edit", "--model", "nope", "--requests", "{}"]),
        ("bad.txt", ["mbok", "eval", "--model", "nope", "--text-file", "{}"]),
        ("bad.jsonl", ["seekbench", "analyze", "{}"]),
        ("bad.jsonl", ["ltpo", "solve", "--model", "nope", "--data", "{}"]),
        ("bad.jsonl", ["perk", "eval", "--model", "nope.ckpt", "--data", "{}"]),
    ],
    ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else v,
)
def test_text_that_is_not_utf8_is_one_line_naming_the_file(
    name: str, command: list[str], tmp_path: Path, capsys: Any
) -> None:
    """Input bytes that are not UTF-8 end in one line naming the file (11b2942: a
    ``UnicodeDecodeError`` traceback from every reader but dispersion's ``.txt``)."""
    bad = _not_utf8(tmp_path, name)
    args = [str(bad) if a == "{}" else a for a in command]
    args += ["--out", str(tmp_path / "o")]  # every reader writes its result to --out
    line = assert_one_line_error(main, args, capsys)
    assert f"{bad}: not UTF-8 text (byte 0xff at offset 0)" in line, line
    assert not (tmp_path / "o").exists()


def test_device_gpu_and_cuda_without_cuda_are_one_line(tmp_path: Path, capsys: Any) -> None:
    """``--device gpu`` (and ``cuda`` on a machine without CUDA) name the option in one line
    (11b2942: ``RuntimeError: Expected one of cpu, cuda, ... device type`` traceback)."""
    import torch

    parallel = tmp_path / "p.jsonl"
    parallel.write_text(json.dumps({"en": "a cat", "es": "un gato"}) + "\n")
    base = ["linguamap", "similarity", "--model", "nope", "--parallel", str(parallel)]
    base += ["--out", str(tmp_path / "s.json")]
    line = assert_one_line_error(main, [*base, "--device", "gpu"], capsys)
    assert "--device gpu: not a device" in line, line
    if not torch.cuda.is_available():
        line = assert_one_line_error(main, [*base, "--device", "cuda"], capsys)
        assert "--device cuda: PyTorch sees no CUDA device" in line, line


def test_a_truncated_perk_checkpoint_is_one_line(tmp_path: Path, capsys: Any) -> None:
    """A truncated checkpoint is one line naming it (11b2942: ``UnpicklingError`` /
    ``RuntimeError`` traceback from ``torch.load``)."""
    import torch

    data = tmp_path / "data.jsonl"
    assert main(["perk", "synth", "--out", str(data), "--n", "2"]) == 0
    ckpt = tmp_path / "trunc.ckpt"
    torch.save({"perk_method": "perk", "state_dict": {"w": torch.zeros(64)}}, ckpt)
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    args = ["perk", "eval", "--model", str(ckpt), "--data", str(data), "--out", str(tmp_path / "o")]
    line = assert_one_line_error(main, [*args, "--device", "cpu"], capsys, drop_earlier=True)
    assert f"{ckpt}: not a readable PERK / FT-ICR checkpoint" in line, line
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("router")
    assert main(["meta_router", "simulate", "--out", str(root / "sim"), "--n", "400"]) == 0
    sim = root / "sim"
    args = ["meta_router", "fit", "--gold", str(sim / "gold.csv"), "--strong", "strong"]
    args += [
        "--weak",
        "weak",
        "--preference",
        str(sim / "preference.csv"),
        "--out",
        str(root / "r"),
    ]
    assert main(args) == 0
    return root


def test_router_files_are_0644_and_bad_routers_or_queries_are_one_line(
    router: Path, tmp_path: Path, capsys: Any
) -> None:
    """``meta_router fit`` writes mode-0644 files; ``route`` with a corrupt ``router.joblib``, or
    with queries whose feature columns differ from the router's, ends in one line (11b2942:
    ``EOFError`` / ``UnpicklingError`` and ``KeyError: 'svd'`` tracebacks)."""
    saved = router / "r" / "router.joblib"
    for name in ("router.joblib", "fit.json"):
        assert (router / "r" / name).stat().st_mode & 0o777 == 0o644
    queries = tmp_path / "q.csv"
    queries.write_text("prompt\nhello there\n")
    route = ["meta_router", "route", "--queries", str(queries)]
    line = assert_one_line_error(
        main, [*route, "--router", str(saved), "--out", str(tmp_path / "a.csv")], capsys
    )
    assert "'prompt' column but the router was fitted on x0.. feature columns" in line, line
    queries.write_text("x0,x1\n0.1,0.2\n")
    line = assert_one_line_error(
        main, [*route, "--router", str(saved), "--out", str(tmp_path / "a.csv")], capsys
    )
    assert "feature columns ['x0', 'x1'] differ from the router's" in line, line
    corrupt = tmp_path / "router.joblib"
    corrupt.write_bytes(saved.read_bytes()[:50])
    line = assert_one_line_error(
        main, [*route, "--router", str(corrupt), "--out", str(tmp_path / "a.csv")], capsys
    )
    assert f"{corrupt}: not a router saved by `meta_router fit`" in line, line
    # an empty or malformed queries CSV (route) or test CSV (fit --test, before fitting): one
    # line naming the file, not pandas' EmptyDataError / ParserError traceback
    for text in ("", 'x0,x1\n"0.1,0.2\n'):
        queries.write_text(text)
        line = assert_one_line_error(
            main, [*route, "--router", str(saved), "--out", str(tmp_path / "a.csv")], capsys
        )
        assert f"{queries}: not a readable CSV" in line, line
    gold = tmp_path / "gold.csv"
    gold.write_text("x0,strong,weak\n0.1,1,0\n")
    fit = ["meta_router", "fit", "--gold", str(gold), "--preference", str(gold)]
    fit += ["--strong", "strong", "--weak", "weak", "--out", str(tmp_path / "f")]
    line = assert_one_line_error(main, [*fit, "--test", str(queries)], capsys)
    assert f"{queries}: not a readable CSV" in line, line
    assert not (tmp_path / "a.csv").exists() and not (tmp_path / "f" / "fit.json").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["meta_router", "route", "--router", "r.joblib", "--queries", "q.csv", "--w", "nan"],
        ["meta_router", "route", "--router", "r.joblib", "--queries", "q.csv", "--w", "inf"],
        ["suit", "edit", "--requests", "r.json", "--kl-factor", "inf"],
        ["suit", "edit", "--requests", "r.json", "--clamp", "nan"],
        ["adl", "kl", "--base-model", "a", "--model", "b", "--texts", "t", "--temperature", "nan"],
    ],
    ids=lambda c: " ".join(c[:2] + c[-2:]),
)
def test_non_finite_numbers_are_refused(command: list[str], tmp_path: Path, capsys: Any) -> None:
    """``nan`` / ``inf`` in a numeric option is refused in one line naming the option (11b2942:
    ``suit edit --kl-factor inf`` ran, ``meta_router route --w nan`` sent every query to the
    cheap model)."""
    line = assert_one_line_error(main, [*command, "--out", str(tmp_path / "o")], capsys)
    assert command[-2] in line, line


def test_ctrl_c_inside_the_work_is_one_line_and_exit_130(
    router: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while ``meta_router fit`` fits ends with one line and exit status 130 and leaves no
    output folder behind. A guard rather than a fix: 11b2942 already ended so (nothing in
    llm-methods catches KeyboardInterrupt), and created ``--out`` only after fitting."""
    from llm_methods.meta_router import model

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(model.MetaRouter, "fit", interrupted)
    monkeypatch.delenv("LLM_METHODS_TRACEBACK", raising=False)
    sim = router / "sim"
    out = tmp_path / "r"
    args = [
        "meta_router",
        "fit",
        "--gold",
        str(sim / "gold.csv"),
        "--strong",
        "strong",
        "--weak",
        "weak",
        "--preference",
        str(sim / "preference.csv"),
    ]
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 130
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert lines[-1] == "llm-methods: interrupted" and "Traceback" not in run.err, run.err
    assert not out.exists()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "command",
    [
        ["mas2", "train", "--pool", "missing.yaml"],
        ["mas2", "run", "--pool", "missing.yaml"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_mas2_out_is_checked_before_the_pool_and_cto(
    command: list[str], tmp_path: Path, capsys: Any
) -> None:
    """``mas2 train`` / ``run`` check ``--out`` before the pool is read or CTO runs (11b2942:
    the missing pool first; with a good pool, ``[Errno 17]`` after all of CTO)."""
    out = _bad_out(tmp_path)
    line = assert_one_line_error(main, [*command, "--out", str(out)], capsys)
    assert f"--out {out}: exists and is a file; give a folder" in line, line


def test_a_malformed_mas2_pool_is_one_line(tmp_path: Path, capsys: Any) -> None:
    """A pool YAML that is not YAML is one line naming the file and line (11b2942: an 86-line
    ``yaml.parser.ParserError`` traceback); the refused run leaves no ``--out`` folder."""
    pool = tmp_path / "pool.yaml"
    pool.write_text("models:\n  a: {price: 1\n  b: [\n")
    out = tmp_path / "o"
    args = ["mas2", "run", "--pool", str(pool), "--out", str(out)]
    line = assert_one_line_error(main, args, capsys)
    assert f"{pool}:" in line and "not valid YAML" in line, line
    assert not out.exists()


def test_remix_fit_checks_the_save_dir_before_loading_the_policy(
    tmp_path: Path, capsys: Any
) -> None:
    """``remix fit --model.init_args.save_dir`` naming a file is refused before the policy is
    loaded or trained (11b2942: trained, then lost the policy on ``FileExistsError``); a folder
    of earlier results is refused unless ``--overwrite``."""
    out = _bad_out(tmp_path)
    args = ["remix", "fit", "--config", "tiny", "--model.init_args.save_dir", str(out)]
    line = assert_one_line_error(main, args, capsys)
    assert f"--model.init_args.save_dir {out}: exists and is a file" in line, line
    folder = tmp_path / "policy"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    args = ["remix", "fit", "--config", "tiny", f"--model.init_args.save_dir={folder}"]
    line = assert_one_line_error(main, args, capsys)
    assert "holds earlier results; pass --overwrite" in line, line
    # the same folder named only in a --config YAML (d875146: not seen until the policy was saved)
    own = tmp_path / "own.yaml"
    own.write_text(f"model:\n  init_args:\n    save_dir: {folder}\n", encoding="utf-8")
    line = assert_one_line_error(
        main, ["remix", "fit", "--config", "tiny", "--config", str(own)], capsys
    )
    assert f"--model.init_args.save_dir {folder}: holds earlier results" in line, line


def test_mbok_finetune_checks_save_to_from_a_config_before_loading(
    tmp_path: Path, capsys: Any
) -> None:
    """``mbok finetune``'s ``save_to`` given only in a ``--config`` YAML is checked before the
    model is loaded (d875146: only the command line was checked)."""
    earlier = tmp_path / "c.safetensors"
    earlier.write_bytes(b"x")
    own = tmp_path / "own.yaml"
    own.write_text(f"model:\n  init_args:\n    save_to: {earlier}\n", encoding="utf-8")
    line = assert_one_line_error(
        main, ["mbok", "finetune", "--config", "tiny", "--config", str(own)], capsys
    )
    assert f"--model.init_args.save_to {earlier}: exists; pass --overwrite" in line, line
    assert earlier.read_bytes() == b"x"


def test_ltpo_solve_shows_progress_unless_quiet(tmp_path: Path, capsys: Any) -> None:
    """``ltpo solve`` (~5 s a problem) prints progress lines on stderr, none with ``--quiet``
    (11b2942: silent, and ``--quiet`` unknown)."""
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(
        ["Tom has 3 apples. How many now? 7. " * 8] * 3,
        vocab_size=280,
        n_layers=1,
        hidden=32,
        heads=2,
        max_len=1024,
    )
    model = tmp_path / "model"
    lm.model.save_pretrained(model)
    lm.tokenizer.save_pretrained(model)
    data = tmp_path / "p.jsonl"
    assert main(["ltpo", "synth", "--out", str(data), "--n", "2"]) == 0
    args = ["ltpo", "solve", "--model", str(model), "--data", str(data), "--device", "cpu"]
    args += ["--ltpo.steps", "1", "--ltpo.n_thoughts", "2", "--decode.max_new_tokens", "2"]
    run = run_main(main, [*args, "--out", str(tmp_path / "a")], capsys)
    assert run.code == 0, run.err
    assert "ltpo batches: 1/1" in run.err and "(done)" in run.err, run.err
    run = run_main(main, [*args, "--out", str(tmp_path / "b"), "--quiet"], capsys)
    assert run.code == 0 and "ltpo batches" not in run.err, run.err


@pytest.mark.parametrize(
    "args",
    [
        ["remix", "fit", "--config", "tiny", "--model.init_args.rl.lr", "nan"],
        ["perk", "fit", "--config", "tiny", "--model.init_args.lr=inf"],
    ],
    ids=lambda a: a[0],
)
def test_lightning_numbers_must_be_finite(args: list[str], capsys: Any) -> None:
    """``nan`` / ``inf`` on a LightningCLI command line is one line naming the option, before
    any model is built (11b2942: jsonargparse's long "Does not validate against any of the
    Union subtypes" line, or a run that trained on NaN)."""
    line = assert_one_line_error(main, args, capsys)
    option, value = args[-1].split("=") if "=" in args[-1] else args[-2:]
    assert f"{option} {value}: not a finite number" in line, line
    assert "Union" not in line


def test_suit_edit_writes_0644_files_with_progress_and_refuses_a_rerun(
    tmp_path: Path, capsys: Any
) -> None:
    """``suit edit`` on a tiny model: ``edited_weights.safetensors`` and ``edit.json`` are mode
    0644 and nothing else is left in ``--out`` (11b2942: the weights were 0600); progress lines
    on stderr (none with ``--quiet``); a rerun into the same folder is refused before the model
    is loaded unless ``--overwrite``."""
    from llm_methods.suit.data import synth_world, write_counterfact
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    reqs = synth_world(3, 0)[:2]
    texts = [f"{r.prompt.format(r.subject)}{r.target_true}." for r in reqs] * 4
    tok = train_bpe([*texts, "The quick brown fox."], 300)
    tiny_llama(len(tok), 3, 32, 2, max_len=128, seed=0).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    requests = write_counterfact(reqs, tmp_path / "req.json")
    out = tmp_path / "o"
    args = ["suit", "edit", "--model", str(tmp_path / "model"), "--requests", str(requests)]
    args += ["--method", "memit", "--layers", "0,1", "--steps", "2", "--device", "cpu"]
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 0, run.err
    assert "suit edit batches: 1/1" in run.err, run.err
    assert sorted(p.name for p in out.iterdir()) == ["edit.json", "edited_weights.safetensors"]
    for path in out.iterdir():
        assert path.stat().st_mode & 0o777 == 0o644, path
    again = [*args[:2], "--model", "no-such-model", *args[4:], "--out", str(out)]
    line = assert_one_line_error(main, again, capsys)
    assert "holds earlier results; pass --overwrite" in line, line
    run = run_main(main, [*args, "--out", str(out), "--overwrite", "--quiet"], capsys)
    assert run.code == 0 and "batches" not in run.err, run.err


@pytest.mark.parametrize(
    ("command", "old", "new"),
    [
        (
            ["perk", "eval", "--model", "m.ckpt", "--data", "d.jsonl"],
            ["--ckpt", "m.ckpt"],
            "--model",
        ),
        (["mas2", "run", "--backend", "local", "--model", "m"], ["--local-model", "m"], "--model"),
        (["mas2", "generate", "--backend", "local"], ["--local-model=m"], "--model"),
        (["adl", "kl", "--model", "m"], ["--base", "b"], "--base-model"),
        (["adl", "diff", "--base-model", "b"], ["--ft", "f"], "--model"),
        (["mbok", "eval", "--model", "m"], ["--text", "t.txt"], "--text-file"),
        (
            ["remix", "fit", "--config", "tiny"],
            ["--model.init_args.policy", "p"],
            "--model.init_args.model",
        ),
    ],
    ids=lambda v: v[0] if isinstance(v, list) and v and not v[0].startswith("-") else None,
)
def test_model_flags_renamed_in_0_7_0_are_refused_naming_the_new_flag(
    command: list[str], old: list[str], new: str, tmp_path: Path, capsys: Any
) -> None:
    """One flag for a model spec, ``--model`` (11b2942: ``perk eval --ckpt``, ``mas2
    --local-model``). The old spellings warned in 0.7.0 and are removed in 0.8.0: refused in one
    line naming the new flag, exit 2, before any work (no ``--out`` folder) (d875146: "the
    following arguments are required: --model", "unrecognized arguments" or jsonargparse's Union
    message)."""
    out = tmp_path / "o"
    line = assert_one_line_error(main, [*command, *old, "--out", str(out)], capsys)
    flag = old[0].partition("=")[0]
    assert f"{' '.join(command[:2])} {flag}: removed in llm-methods 0.8.0; use {new}" in line, line
    assert not out.exists()


def test_bed_play_with_an_llm_likelihood_shows_progress_and_checks_out_first(
    tmp_path: Path, capsys: Any
) -> None:
    """``bed play --likelihood llm`` shows progress over the likelihood table (none with
    ``--quiet``) and refuses a bad ``--out`` before the model is loaded (11b2942: silent;
    ``[Errno 17]`` after all the games)."""
    from llm_methods.zoo.models import tiny_lm

    world = tmp_path / "w.json"
    args = ["bed", "world", "--entities", "10", "--attributes", "8", "--vague", "2"]
    assert main([*args, "--out", str(world)]) == 0
    lm = tiny_lm(["Is it an animal? yes no. " * 6] * 3, vocab_size=280, n_layers=1, hidden=32)
    lm.model.save_pretrained(tmp_path / "m")
    lm.tokenizer.save_pretrained(tmp_path / "m")
    play = ["bed", "play", "--world", str(world), "--likelihood", "llm", "--games", "2"]
    play += ["--n-hyp", "4", "--m-cand", "2", "--max-turns", "2", "--device", "cpu"]
    line = assert_one_line_error(
        main,
        [*play, "--model", "no-such-model", "--out", str(_bad_out(tmp_path))],
        capsys,
        drop_earlier=True,
    )
    assert "exists and is a file; give a folder" in line, line
    run = run_main(
        main, [*play, "--model", str(tmp_path / "m"), "--out", str(tmp_path / "a")], capsys
    )
    assert run.code == 0, run.err
    assert "bed likelihood: 2/2" in run.err and "(done)" in run.err, run.err
    quiet = [*play, "--model", str(tmp_path / "m"), "--out", str(tmp_path / "b"), "--quiet"]
    run = run_main(main, quiet, capsys)
    assert run.code == 0 and "bed likelihood" not in run.err, run.err
