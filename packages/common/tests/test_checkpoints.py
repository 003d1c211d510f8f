"""iclr26_common.checkpoints: one safe way to read a checkpoint, with one-line errors."""

from __future__ import annotations

import pickle
from collections import OrderedDict
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the [lightning] extra; common alone has no torch

from iclr26_common.checkpoints import load_weights_only  # noqa: E402


class FormatError(Exception):
    pass


class Payload:  # a pickled class instance: weights_only=True must refuse it
    def __init__(self) -> None:
        self.x = 1


def test_reads_tensors_and_plain_containers(tmp_path: Path) -> None:
    path = tmp_path / "ok.ckpt"
    torch.save({"state_dict": OrderedDict(w=torch.arange(3.0)), "epoch": 2}, path)
    out = load_weights_only(path, require_state_dict=True)
    assert out["epoch"] == 2 and torch.equal(out["state_dict"]["w"], torch.tensor([0.0, 1, 2]))


def test_missing_file_names_the_file_and_what(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.pt: no such p0 file$"):
        load_weights_only(tmp_path / "nope.pt", "p0 file")


@pytest.mark.parametrize("content", [b"not a pickle at all", pickle.dumps(Payload())])
def test_unreadable_or_unsafe_content_is_one_line_in_the_callers_error(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "bad.ckpt"
    path.write_bytes(content)
    with pytest.raises(FormatError) as info:
        load_weights_only(path, "policy file", error=FormatError)
    message = str(info.value)
    assert message.startswith(f"{path}: not a readable policy file (") and "\n" not in message


def test_refusing_code_in_a_pickle_runs_no_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "x": Evil()}, path)
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_weights_only(path)
    assert not marker.exists()


def test_require_state_dict(tmp_path: Path) -> None:
    path = tmp_path / "plain.pt"
    torch.save(torch.zeros(2), path)
    assert torch.equal(load_weights_only(path), torch.zeros(2))
    with pytest.raises(
        ValueError, match=r"plain\.pt: not a Lightning checkpoint \(no 'state_dict'\)"
    ):
        load_weights_only(path, require_state_dict=True)


def test_reasons_are_readable(tmp_path: Path) -> None:
    """torch's refusal is a paragraph with terminal colour codes; the line kept names what was
    refused, and a text file says which error it raised (a bare ``101`` said nothing)."""
    refused = tmp_path / "refused.ckpt"
    torch.save({"x": Payload()}, refused)
    with pytest.raises(ValueError) as info:
        load_weights_only(refused)
    assert "refused by weights_only=True: Unsupported global" in str(info.value)
    assert "Payload" in str(info.value) and "\x1b" not in str(info.value)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(ValueError, match=r"notes\.txt: not a readable checkpoint \(\w+Error: "):
        load_weights_only(text)


def test_option_starts_every_message(tmp_path: Path) -> None:
    """``option=`` names the command-line option in every error, as ``--ckpt_path``'s do
    (issue 36 review: ``remac eval --policy X`` / ``medimg export --ckpt X`` said only "X: ...")."""
    torch.save({"state_dict": {}, "iclr26_model": "rf_matid.lit_module.M"}, tmp_path / "rf.ckpt")
    (tmp_path / "bad.ckpt").write_bytes(b"not a pickle")
    (tmp_path / "dir").mkdir()
    cases = [
        ("rf.ckpt", FormatError, "a checkpoint of rf-matid (rf_matid.lit_module.M), not of x-y"),
        ("bad.ckpt", FormatError, "not a readable checkpoint ("),
        ("dir", IsADirectoryError, "is a folder; give a checkpoint"),
        ("nope.ckpt", FileNotFoundError, "no such checkpoint"),
    ]
    for name, kind, says in cases:
        with pytest.raises(kind) as info:
            load_weights_only(tmp_path / name, error=FormatError, package="x_y", option="--ckpt")
        message = str(info.value)
        assert message.startswith(f"--ckpt {tmp_path / name}: {says}"), message
        assert "\n" not in message
    plain = tmp_path / "plain.pt"
    torch.save(torch.ones(1), plain)
    with pytest.raises(FormatError, match=r"^--ckpt .*plain\.pt: not a Lightning checkpoint"):
        load_weights_only(plain, error=FormatError, require_state_dict=True, option="--ckpt")
    assert torch.equal(load_weights_only(plain, option="--ckpt"), torch.ones(1))
