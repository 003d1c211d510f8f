"""Issue 36 for ``perk`` and ``antibody``: the computing commands take ``--seed``, ``--device``
and ``--out``, and ``--help`` shows every option's default (on d9942d3 ``perk eval`` and
``antibody eval`` had no ``--seed``, ``antibody pretrain`` no ``--device``, and no help showed
defaults)."""

from __future__ import annotations

import pytest

from llm_methods.cli import main


def _help(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["perk", "eval"], ["--seed", "--device", "--out", "(default: 0)", "(default: none)"]),
        (["perk", "synth"], ["--seed", "--out", "(default: 100)", "(default: qa1 qa2 qa3)"]),
        (
            ["antibody", "eval"],
            ["--seed", "--device", "--out", "(default: 200)", "(default: auto)"],
        ),
        (["antibody", "pretrain"], ["--seed", "--device", "--out", "(default: 300)"]),
        (["antibody", "synth"], ["--seed", "--out", "(default: 0)"]),
    ],
)
def test_commands_have_seed_device_out_and_show_defaults(
    capsys: pytest.CaptureFixture, argv: list[str], expected: list[str]
) -> None:
    text = _help(capsys, argv)
    for part in expected:
        assert part in text, (argv, part, text)


def test_bad_seed_is_one_line(capsys: pytest.CaptureFixture, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from iclr26_common.testing import assert_one_line_error

    argv = ["antibody", "synth", "--seed", "-1", "--out", str(tmp_path / "s")]
    line = assert_one_line_error(main, argv, capsys)
    assert "--seed" in line, line
