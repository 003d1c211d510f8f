"""Issue 36, "every command keeps the same promises", for every method's commands and the
``score`` / ``generate`` / ``zoo`` tools, through the public CLI in-process: one set of flags
(``--model`` for every model spec, ``--seed`` (checked), ``--device`` where a model runs,
``--out`` saying whether it is a folder or a file, defaults in ``--help``), no result only on
stdout, one definition of SUIT's edit defaults, one-line refusals, progress with ``--quiet``,
finished work kept and ``--resume``-d. The behaviour of each command is tested in its own file
(``test_mbok_cli.py``, ``test_remix_cli.py``, ...); what a review found left on 52aa8a9 in
``test_input_output_promises.py``. Each test fails on d9942d3 (its docstring says how; the
MBOK, ReMix, MAS², SeekBench and Meta-Router cases were ``test_method_command_promises.py``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from iclr26_common.testing import assert_one_line_error, run_main
from llm_methods.cli import main

TEXTS = ["The quick brown fox jumps over the lazy dog. " * 4, "Lists and tuples. " * 8]


@pytest.fixture(scope="module")
def model_dir(saved_tiny_lm: Any) -> Path:
    """A tiny untrained 2-layer Llama folder (any ``--model`` takes it)."""

    return saved_tiny_lm("tiny-model", TEXTS * 3, vocab_size=280, n_layers=2, hidden=32, heads=2)


@pytest.fixture(scope="module")
def ft_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``model_dir`` with layer 0's FFN output shifted: a "finetuned" model for ADL."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = Path(shutil.copytree(model_dir, tmp_path_factory.mktemp("ft") / "ft"))
    model = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.add_(0.1)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "t.jsonl"
    path.write_text(
        "\n".join(json.dumps({"text": f"The quick brown fox {i} jumps."}) for i in range(6))
    )
    return path


def _help(args: list[str], capsys: Any) -> str:
    run = run_main(main, [*args, "--help"], capsys)
    assert run.code == 0, run.err
    return run.out


def _entries(help_text: str) -> dict[str, tuple[str, str]]:
    """``{option: (its head, e.g. "--out OUT", its whole entry on one line)}`` of the options
    section of an argparse ``--help``."""
    body = help_text[help_text.index("options:") :]
    found = {}
    for entry in re.split(r"\n(?=  -)", body)[1:]:
        head = re.split(r"\s{2,}", entry.strip())[0]
        names = re.findall(r"--[\w-]+", head)
        if names:
            found[names[-1]] = (head, " ".join(entry.split()))
    return found


HELPED = [
    ["adl", "diff"],
    ["adl", "kl"],
    ["ltpo", "synth"],
    ["ltpo", "judge"],
    ["perk", "judge"],
    ["suit", "edit"],
    ["suit", "facts"],
    ["suit", "trace"],
    ["suit", "synth"],
    ["linguamap", "consistency"],
    ["linguamap", "similarity"],
    ["dispersion", "measure"],
    ["bed", "play"],
    ["bed", "eig"],
    ["bed", "world"],
    ["score"],
    ["generate"],
    ["zoo", "list"],
    ["mbok", "compress"],
    ["mbok", "eval"],
    ["remix", "eval"],
    ["remix", "synth"],
    ["mas2", "generate"],
    ["mas2", "run"],
    ["mas2", "train"],
    ["mas2", "synth"],
    ["seekbench", "analyze"],
    ["seekbench", "judge"],
    ["seekbench", "synth"],
    ["meta_router", "fit"],
    ["meta_router", "route"],
    ["meta_router", "official"],
    ["meta_router", "simulate"],
    ["antibody", "eval"],
    ["antibody", "synth"],
    ["antibody", "pretrain"],
    ["perk", "synth"],
]


@pytest.mark.parametrize("command", HELPED, ids=" ".join)
def test_help_shows_every_default_and_what_out_is(command: list[str], capsys: Any) -> None:
    """Every option that takes a value and is not required shows its default in ``--help``, and
    each command has ``--out`` saying whether it is a folder or a file (the zoo: ``--cache-dir``)
    (d9942d3: e.g. ``adl diff --positions``, ``bed world --entities``, ``generate
    --max-new-tokens``, ``mbok eval --seq-len``, ``mas2 train --rounds``, ``meta_router simulate
    --n`` showed none; ``score`` had no ``--out``, ``zoo list`` no ``--cache-dir``; ``seekbench
    analyze --out`` said neither)."""
    text = _help(command, capsys)
    usage = " ".join(text[: text.index("options:")].split())
    missing = []
    for name, (head, entry) in _entries(text).items():
        takes_value = any(not t.startswith("-") for t in head.replace(",", " ").split())
        optional = f"[{name} " in usage or f"[{name}]" in usage
        if takes_value and optional and "default" not in entry.lower():
            missing.append(head)
    assert not missing, f"{' '.join(command)}: no default shown for {missing}"
    entries = _entries(text)
    if command[0] == "zoo":
        assert "folder of the zoo models" in entries["--cache-dir"][1]
    else:
        out = entries["--out"][1]
        assert "folder" in out or "file" in out, out


@pytest.mark.parametrize(
    "command",
    [
        ["adl", "diff", "--model", "a", "--base-model", "b", "--texts", "t", "--out", "o"],
        ["adl", "kl", "--model", "a", "--base-model", "b", "--texts", "t", "--out", "o"],
        ["suit", "edit", "--requests", "r.json", "--out", "o"],
        ["suit", "facts", "--out", "o.json"],
        ["suit", "trace", "--requests", "r.json", "--out", "o.json"],
        ["linguamap", "similarity", "--model", "m", "--parallel", "p", "--out", "o.json"],
        ["dispersion", "measure", "--out", "o"],
        ["score", "--text", "x"],
        ["generate", "--prompt", "x"],
        ["bed", "eig", "--out", "o.json"],
        ["mbok", "compress", "--out", "x.safetensors"],
        ["mbok", "eval", "--out", "o.json"],
        ["remix", "eval", "--out", "o"],
        ["remix", "synth", "--out", "o.jsonl"],
        ["mas2", "run", "--out", "o"],
        ["mas2", "generate"],
        ["seekbench", "analyze", "t.jsonl", "--out", "o"],
        ["meta_router", "fit", "--gold", "g.csv", "--strong", "a", "--weak", "b", "--out", "o"],
        ["zoo", "build", "micro"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_every_computing_command_takes_a_seed(command: list[str], capsys: Any) -> None:
    """``--seed`` exists (d9942d3: ``adl``, ``suit edit/facts/trace``, ``linguamap
    similarity``, ``score``, ``mbok compress/eval`` and ``remix eval`` had none:
    "unrecognized arguments"; 52aa8a9: ``zoo build``) and a seed outside [0, 2**32) is one
    line naming it (d9942d3: ``--seed -1`` ran in some)."""
    line = assert_one_line_error(main, [*command, "--seed", "-1"], capsys)
    assert "--seed" in line and "[0, 2**32)" in line, line


@pytest.mark.parametrize(
    "command",
    [
        ["mbok", "compress", "--model", "nope", "--out", "{out}.safetensors"],
        ["mbok", "eval", "--model", "nope", "--out", "{out}.json"],
        ["remix", "eval", "--model", "nope", "--out", "{out}"],
        ["mas2", "run", "--backend", "local", "--models", "m=1", "--out", "{out}"],
        ["mas2", "generate", "--backend", "local", "--models", "m=1"],
        ["seekbench", "judge", "{traces}", "--judge", "lm", "--out", "{out}.jsonl"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_every_model_command_takes_a_checked_device(
    command: list[str], tmp_path: Any, capsys: Any
) -> None:
    """``--device`` exists where a model runs and ``--device gpu`` is one line naming it before
    any model is loaded (d9942d3: ``mbok compress/eval``, ``remix eval``, ``mas2 run/generate``,
    ``seekbench judge`` had no ``--device``)."""
    from llm_methods.seekbench.data import write_traces
    from llm_methods.seekbench.synth import synth_traces

    traces = tmp_path / "t.jsonl"
    write_traces(synth_traces(2, ["calibrated"], seed=0), traces)
    args = [a.format(out=tmp_path / "o", traces=traces) for a in command]
    line = assert_one_line_error(main, [*args, "--device", "gpu"], capsys)
    assert "--device gpu: not a device" in line, line
    assert not any(p.name.startswith("o") for p in tmp_path.iterdir())


def test_adl_model_and_base_model_and_the_removed_spellings_are_refused(
    model_dir: Path, ft_dir: Path, texts: Path, tmp_path: Path, capsys: Any
) -> None:
    """``adl diff`` takes ``--model`` (the finetuned model under study) and ``--base-model``;
    ``--seed`` is recorded; progress lines on stderr, none with ``--quiet`` (d9942d3: ``--model``
    unknown, ``adl diff`` silent). ``--ft`` / ``--base`` (renamed in 0.7.0) are removed in 0.8.0:
    each is refused in one line naming the new flag, exit 2, and ``--base`` is not taken as an
    abbreviation of ``--base-model`` (a parser with abbreviations on accepts it silently)."""
    common = ["--texts", str(texts), "--top-k", "5", "--device", "cpu"]
    new = ["adl", "diff", "--model", str(ft_dir), "--base-model", str(model_dir), *common]
    run = run_main(main, [*new, "--out", str(tmp_path / "new"), "--seed", "3"], capsys)
    assert run.code == 0, run.err
    assert "adl diff base-model batches: 1/1" in run.err, run.err
    assert "adl diff model batches: 1/1" in run.err, run.err
    result = json.loads((tmp_path / "new" / "adl.json").read_text())
    assert result["seed"] == 3 and result["ft"] == str(ft_dir)
    assert result["base"] == str(model_dir)
    for command in ("diff", "kl"):
        pair = ["--model", str(ft_dir), "--base-model", str(model_dir)]
        args = ["adl", command, *pair, "--texts", str(texts), "--out", str(tmp_path / "old")]
        for old, use in (
            (["--ft", str(ft_dir)], "--model"),
            (["--base", str(model_dir)], "--base-model"),
        ):
            line = assert_one_line_error(main, [*args, *old], capsys)
            assert f"adl {command} {old[0]}: removed in llm-methods 0.8.0; use {use}" in line
            assert "deprecated" not in line and not (tmp_path / "old").exists()


def test_suit_edit_defaults_are_edit_configs(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``suit edit``'s value-loop defaults come from ``EditConfig`` (one definition): its steps,
    templates, null threshold, clamp and KL factor; ``--one-template`` is the experiments'
    prompt-only loop; ``--seed`` reaches the config (d9942d3: the CLI used 10 steps and one
    template where ``EditConfig()`` has 20 and three; no ``--seed``)."""
    from llm_methods.suit import editors
    from llm_methods.suit.editors import EditConfig

    text = _help(["suit", "edit"], capsys)
    entries = {name: entry for name, (_, entry) in _entries(text).items()}
    defaults = EditConfig()
    assert f"(default: {defaults.steps})" in entries["--steps"]
    assert f"(default: {defaults.null_threshold})" in entries["--null-threshold"]
    assert f"(default: {defaults.clamp})" in entries["--clamp"]
    assert f"{len(defaults.templates)} context templates" in entries["--one-template"]
    seen: list[EditConfig] = []

    class Stop(Exception):
        pass

    def editor(lm: Any, method: str, cfg: EditConfig, *args: Any, **kwargs: Any) -> Any:
        seen.append(cfg)
        raise Stop  # the configuration is what this test is about, not the edit

    monkeypatch.setattr(editors, "Editor", editor)
    monkeypatch.setenv("LLM_METHODS_TRACEBACK", "1")
    requests, model = _suit_world(tmp_path)
    args = ["suit", "edit", "--model", str(model), "--requests", str(requests), "--device", "cpu"]
    args += ["--method", "memit", "--layers", "0,1", "--quiet"]
    for extra in ([], ["--one-template", "--seed", "7"]):
        with pytest.raises(Stop):
            main([*args, *extra, "--out", str(tmp_path / f"o{len(seen)}")])
    first, second = seen
    assert first.steps == defaults.steps and first.templates == defaults.templates
    assert first.null_threshold == defaults.null_threshold and first.clamp == defaults.clamp
    assert first.kl_factor == defaults.kl_factor and first.seed == 0
    assert second.templates == ("{}",) and second.seed == 7


def test_suit_edit_keeps_finished_batches_and_resumes(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``suit edit`` keeps its state after each batch in ``--out`` (marked partial); Ctrl-C is
    one line, exit 130; ``--resume`` with other settings is refused naming them; with the same
    ones it edits only the batches left and writes what an uninterrupted run writes, and the
    state file is gone (d9942d3: an interrupted edit lost every batch; no ``--resume``)."""
    from llm_methods.suit import editors

    real = editors.Editor.edit
    calls: list[int] = []
    interrupt = False

    def edit(self: Any, requests: Any) -> None:
        calls.append(1)
        if interrupt and len(calls) == 2:
            raise KeyboardInterrupt
        real(self, requests)

    monkeypatch.setattr(editors.Editor, "edit", edit)
    requests, model = _suit_world(tmp_path)
    args = ["suit", "edit", "--model", str(model), "--requests", str(requests), "--device", "cpu"]
    args += ["--method", "alphaedit", "--layers", "0,1", "--batch", "1", "--steps", "3"]
    args += ["--quiet"]
    whole = tmp_path / "whole"
    assert run_main(main, [*args, "--out", str(whole)], capsys).code == 0
    calls.clear()
    interrupt = True
    out = tmp_path / "run"
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 130 and run.err.strip() == "llm-methods: interrupted", run.err
    assert sorted(p.name for p in out.iterdir()) == [".iclr26-partial", "edit-state.safetensors"]
    line = assert_one_line_error(main, [*args, "--out", str(out)], capsys)
    assert "pass --resume" in line, line
    line = assert_one_line_error(
        main, [*args, "--out", str(out), "--resume", "--batch", "2"], capsys
    )
    assert "ran with --batch '1', this one with '2'" in line, line
    calls.clear()
    interrupt = False
    assert run_main(main, [*args, "--out", str(out), "--resume"], capsys).code == 0
    assert len(calls) == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in whole.iterdir())
    for path in whole.iterdir():
        if path.suffix != ".safetensors":
            assert (out / path.name).read_bytes() == path.read_bytes(), path.name
            continue
        import torch
        from safetensors import safe_open

        with safe_open(str(path), "pt") as want, safe_open(str(out / path.name), "pt") as got:
            assert got.metadata() == want.metadata()  # (their order in the file varies)
            assert sorted(got.keys()) == sorted(want.keys())
            for key in want.keys():
                assert torch.equal(got.get_tensor(key), want.get_tensor(key)), key


def _suit_world(tmp_path: Path) -> tuple[Path, Path]:
    """Two synthetic CounterFact requests and a tiny 3-layer model folder whose tokenizer knows
    their words (as test_cli_promises' suit edit test)."""
    from llm_methods.suit.data import COUNTRIES, synth_world, write_counterfact
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    reqs = synth_world(3, 0)[:2]
    words = [f"{r.prompt.format(r.subject)}{r.target_true}." for r in reqs] * 4
    words += [" ".join(row) + " " + name for name, row in COUNTRIES.items()]
    folder = tmp_path / "model"
    if not folder.is_dir():
        tok = train_bpe([*words, "The quick brown fox."], 400)
        tiny_llama(len(tok), 3, 32, 2, max_len=128, seed=0).save_pretrained(folder)
        tok.save_pretrained(folder)
    return write_counterfact(reqs, tmp_path / "req.json"), folder


def test_suit_trace_writes_its_numbers_to_out(tmp_path: Path, capsys: Any) -> None:
    """``suit trace`` writes the AIE per layer, p(answer) and the chosen layer to ``--out``
    (checked before the model is loaded, never overwritten without ``--overwrite``), seeded by
    ``--seed`` (d9942d3: stdout only, no ``--out``, no ``--seed``)."""
    requests, model = _suit_world(tmp_path)
    out = tmp_path / "trace.json"
    args = ["suit", "trace", "--model", str(model), "--requests", str(requests)]
    args += ["--samples", "2", "--device", "cpu", "--seed", "5"]
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 0, run.err
    assert "suit trace facts: 2/2" in run.err, run.err
    record = json.loads(out.read_text())
    assert len(record["aie"]) == 3 and record["seed"] == 5 and record["n_facts"] == 2
    assert f"ROME layer (max AIE, not the last): {record['rome_layer']}" in run.out
    for layer, value in enumerate(record["aie"]):
        assert f"layer {layer:3d}  AIE {value:+.4f}" in run.out
    bad = ["suit", "trace", "--model", "no-such-model", "--requests", "missing.json"]
    line = assert_one_line_error(main, [*bad, "--out", str(out)], capsys)
    assert f"--out {out}: exists; pass --overwrite" in line, line


def test_suit_facts_keeps_finished_chunks_and_resumes(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``suit facts`` keeps each finished chunk in ``OUT.partial/``; Ctrl-C is one line, exit
    130; a rerun is refused unless ``--resume`` (or ``--overwrite``), which probes only the
    chunks left and writes the same file as an uninterrupted run (d9942d3: an interrupted probe
    lost everything; no ``--resume``)."""
    from llm_methods.suit import metrics

    _, model = _suit_world(tmp_path)
    real = metrics.known_facts
    calls: list[int] = []

    def known_facts(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3 and interrupt:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(metrics, "known_facts", known_facts)
    args = ["suit", "facts", "--model", str(model), "--device", "cpu", "--quiet"]
    interrupt = False
    assert run_main(main, [*args, "--out", str(tmp_path / "whole.json")], capsys).code == 0
    chunks = len(calls)
    assert chunks > 3 and not (tmp_path / "whole.json.partial").exists()
    calls.clear()
    interrupt = True
    out = tmp_path / "facts.json"
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 130 and run.err.strip() == "llm-methods: interrupted", run.err
    partial = tmp_path / "facts.json.partial"
    assert not out.exists() and len(list(partial.glob("chunk-*.json"))) == 2
    line = assert_one_line_error(main, [*args, "--out", str(out)], capsys)
    assert "pass --resume" in line, line
    # a probe of other settings (here: another chunk size recorded) is not continued
    recorded = (partial / "settings.json").read_text()
    (partial / "settings.json").write_text(recorded.replace('"chunk": 16', '"chunk": 8'))
    line = assert_one_line_error(main, [*args, "--out", str(out), "--resume"], capsys)
    assert "ran with facts per chunk 8, this one with 16" in line and "--overwrite" in line, line
    (partial / "settings.json").write_text(recorded)
    calls.clear()
    interrupt = False
    assert run_main(main, [*args, "--out", str(out), "--resume"], capsys).code == 0
    assert len(calls) == chunks - 2 and not partial.exists()
    assert out.read_text() == (tmp_path / "whole.json").read_text()


def _problems(tmp_path: Path, n: int) -> Path:
    data = tmp_path / "p.jsonl"
    assert main(["ltpo", "synth", "--out", str(data), "--n", str(n)]) == 0
    return data


def test_ltpo_solve_seed_and_resume_after_ctrl_c(
    model_dir: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ltpo solve`` writes each finished batch's predictions into ``--out`` (marked partial);
    Ctrl-C is one line, exit 130; ``--resume`` with other settings is refused naming them, with
    the same settings it solves only the batches left and gives an uninterrupted run's files;
    ``--seed`` is recorded (d9942d3: no ``--seed``, no ``--resume``, nothing kept)."""
    from llm_methods.ltpo import optimize

    data = _problems(tmp_path, 3)
    real = optimize.decode_with_thoughts
    calls: list[int] = []
    interrupt = False

    def decode(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if interrupt and len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(optimize, "decode_with_thoughts", decode)
    args = ["ltpo", "solve", "--model", str(model_dir), "--data", str(data), "--method", "cot"]
    args += ["--decode.max_new_tokens", "3", "--decode.batch_size", "1", "--seed", "4"]
    args += ["--device", "cpu", "--quiet"]
    assert run_main(main, [*args, "--out", str(tmp_path / "whole")], capsys).code == 0
    calls.clear()
    interrupt = True
    out = tmp_path / "run"
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 130 and run.err.strip() == "llm-methods: interrupted", run.err
    assert (out / ".iclr26-partial").is_file() and not (out / "summary.json").exists()
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 1
    line = assert_one_line_error(main, [*args, "--out", str(out)], capsys)
    assert "pass --resume" in line, line
    other = [*args, "--out", str(out), "--resume", "--decode.max_new_tokens", "4"]
    line = assert_one_line_error(main, other, capsys)
    assert "ran with --decode.max_new_tokens 3, this one with 4" in line, line
    assert "--overwrite" in line, line
    calls.clear()
    interrupt = False
    assert run_main(main, [*args, "--out", str(out), "--resume"], capsys).code == 0
    assert len(calls) == 2 and not (out / ".iclr26-partial").exists()
    for name in ("predictions.jsonl", "summary.json"):
        assert (out / name).read_text() == (tmp_path / "whole" / name).read_text(), name
    assert json.loads((out / "summary.json").read_text())["seed"] == 4


def test_linguamap_results_are_written_to_out(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    """``linguamap consistency`` and ``similarity`` write the numbers they print to ``--out``,
    checked before the input is read and never overwritten without ``--overwrite``
    (d9942d3: stdout only)."""
    answers = tmp_path / "a.txt"
    answers.write_text("la casa es muy grande y tiene un jardín\nthe dog eats the food\n")
    out = tmp_path / "c.json"
    args = ["linguamap", "consistency", str(answers), "--expect", "es"]
    run = run_main(main, [*args, "--out", str(out)], capsys)
    assert run.code == 0, run.err
    record = json.loads(out.read_text())
    assert record["n"] == 2 and record["languages"] == ["es", "en"]
    assert f"consistency (es) {record['consistency']:.3f}" in run.out
    missing = ["linguamap", "consistency", str(tmp_path / "none.txt"), "--expect", "es"]
    line = assert_one_line_error(main, [*missing, "--out", str(out)], capsys)
    assert f"--out {out}: exists; pass --overwrite" in line, line
    parallel = tmp_path / "p.jsonl"
    parallel.write_text(json.dumps({"en": "the lazy dog", "es": "el perro"}) + "\n")
    sim = ["linguamap", "similarity", "--model", str(model_dir), "--parallel", str(parallel)]
    run = run_main(main, [*sim, "--device", "cpu", "--out", str(tmp_path / "s.json")], capsys)
    assert run.code == 0, run.err
    cosine = json.loads((tmp_path / "s.json").read_text())["cosine"]
    assert len(cosine) == 3 and f"cosine {cosine[2]:.4f}" in run.out
    assert "linguamap similarity es: 1/1" in run.err, run.err


def test_bed_eig_writes_out_and_world_refuses_too_few_attributes(
    tmp_path: Path, capsys: Any
) -> None:
    """``bed eig`` writes its table to ``--out`` (d9942d3: stdout only); ``bed world`` with
    ``--attributes`` not above ``--vague`` is one line naming both (d9942d3: "-12 crisp
    attributes cannot separate 16 entities")."""
    out = tmp_path / "eig.json"
    run = run_main(main, ["bed", "eig", "--ns", "2,8", "--states", "3", "--out", str(out)], capsys)
    assert run.code == 0, run.err
    rows = json.loads(out.read_text())["rows"]
    assert [r["n"] for r in rows] == [2, 8]
    assert f"| 8 | {rows[1]['spearman_posterior']:.3f} |" in run.out
    line = assert_one_line_error(main, ["bed", "eig", "--out", str(out)], capsys)
    assert "exists; pass --overwrite" in line, line
    world = ["bed", "world", "--entities", "16", "--attributes", "12", "--out", str(tmp_path / "w")]
    line = assert_one_line_error(main, world, capsys)
    assert "--attributes must exceed --vague" in line and "crisp" in line, line
    assert "-12" not in line and not (tmp_path / "w").exists()


def test_zoo_build_cache_dir_is_the_zoo_folder(tmp_path: Path, capsys: Any, nano_zoo: Any) -> None:
    """``zoo build NAME --cache-dir X`` builds ``X/NAME-<hash>`` and ``zoo list --cache-dir X``
    sees it (d9942d3: ``X/zoo/NAME-<hash>``, one level deeper than asked; ``list`` had no
    ``--cache-dir``)."""
    spec = nano_zoo(2)
    cache = tmp_path / "myzoo"
    run = run_main(main, ["zoo", "build", "nano", "--cache-dir", str(cache)], capsys)
    assert run.code == 0, run.err
    assert "training steps: 2/2" in run.err, run.err  # progress (d9942d3: silent for minutes)
    (folder,) = cache.iterdir()
    assert folder.name == f"nano-{spec.digest()}" and (folder / "zoo.json").is_file()
    run = run_main(main, ["zoo", "list", "--cache-dir", str(cache)], capsys)
    assert re.search(r"^nano\s+built", run.out, re.MULTILINE), run.out


def test_score_and_generate_write_out(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    """``score`` / ``generate`` also write their result to ``--out`` when given, checked before
    the model is loaded (d9942d3: no ``--out``)."""
    out = tmp_path / "s.json"
    score = ["score", "--model", str(model_dir), "--text", "The quick brown fox."]
    run = run_main(main, [*score, "--device", "cpu", "--out", str(out)], capsys)
    assert run.code == 0, run.err
    record = json.loads(out.read_text())
    assert f"log p(text) = {record['logprob']:.4f} nats over {record['tokens']} tokens" in run.out
    line = assert_one_line_error(
        main, ["score", "--model", "no-such-model", "--text", "x", "--out", str(out)], capsys
    )
    assert f"--out {out}: exists; pass --overwrite" in line, line
    gen = ["generate", "--model", str(model_dir), "--prompt", "The quick", "--device", "cpu"]
    run = run_main(main, [*gen, "--max-new-tokens", "3", "--out", str(tmp_path / "g.json")], capsys)
    assert run.code == 0, run.err
    assert json.loads((tmp_path / "g.json").read_text())["text"] in run.out


def test_dispersion_measure_shows_progress(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    """``dispersion measure`` shows progress over its batches, none with ``--quiet``
    (d9942d3: silent for minutes on a large input)."""
    docs = tmp_path / "d.txt"
    docs.write_text(" ".join(TEXTS * 4))
    args = ["dispersion", "measure", "--model", str(model_dir), "--input", str(docs)]
    args += ["--chunk-len", "8", "--max-chunks", "6", "--batch-size", "2", "--device", "cpu"]
    run = run_main(main, [*args, "--out", str(tmp_path / "a")], capsys)
    assert run.code == 0, run.err
    assert "dispersion batches: 3/3" in run.err, run.err
    run = run_main(main, [*args, "--out", str(tmp_path / "b"), "--quiet"], capsys)
    assert run.code == 0 and "dispersion batches" not in run.err, run.err


@pytest.mark.parametrize(
    "command",
    [
        ["ltpo", "synth", "--n", "2"],
        ["suit", "synth", "--subjects", "2"],
        ["bed", "world", "--kind", "animals"],
    ],
    ids=" ".join,
)
def test_generators_never_overwrite_without_overwrite(
    command: list[str], tmp_path: Path, capsys: Any
) -> None:
    """The data generators refuse an existing ``--out`` unless ``--overwrite`` (d9942d3:
    replaced it silently)."""
    out = tmp_path / "data.json"
    out.write_text("mine")
    line = assert_one_line_error(main, [*command, "--out", str(out)], capsys)
    assert f"--out {out}: exists; pass --overwrite" in line and out.read_text() == "mine", line
    assert run_main(main, [*command, "--out", str(out), "--overwrite"], capsys).code == 0
    assert out.read_text() != "mine"


def test_bed_play_shows_progress_over_the_games(tmp_path: Path, capsys: Any) -> None:
    """``bed play`` shows progress over its games (the oracle likelihood included), none with
    ``--quiet`` (d9942d3: silent unless ``--likelihood llm``, and then only for the table)."""
    play = ["bed", "play", "--strategy", "random", "--games", "3", "--max-turns", "3"]
    run = run_main(main, [*play, "--out", str(tmp_path / "a")], capsys)
    assert run.code == 0, run.err
    assert "bed games: 3/3" in run.err, run.err
    run = run_main(main, [*play, "--out", str(tmp_path / "b"), "--quiet"], capsys)
    assert run.code == 0 and "bed games" not in run.err, run.err
