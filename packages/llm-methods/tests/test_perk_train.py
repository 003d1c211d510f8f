"""PERK outer loop + FT-ICR baseline: Lightning modules, data module, configs, memory meter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from llm_methods.perk.data import BabiLongDataModule, extract_output, is_correct, synth_babilong

CONFIG_DIR = Path(__file__).parents[1] / "src" / "llm_methods" / "perk" / "configs"


def test_extract_output() -> None:
    assert extract_output("<support>x</support>\n<output>Kitchen.</output>") == "kitchen"
    assert extract_output("<support>x</support>\n<output>garden") == "garden"
    assert extract_output("office\nmore") == "office"
    assert is_correct("<output>hallway</output>", "Hallway") and not is_correct("", "hallway")


def test_datamodule_synth_and_lengths() -> None:
    dm = BabiLongDataModule(
        n_train=5, n_val=2, n_test=3, n_segments=[2, 6], tasks=["qa1"], batch_size=2
    )
    dm.setup()
    train = dm.splits["train"]
    assert len(train) == 5 and {len(r.context) for r in train} == {5, 9}
    batch = next(iter(dm.train_dataloader()))
    assert isinstance(batch, list) and len(batch) == 2 and batch[0].question
    assert len(dm.splits["test"]) == 3 and dm.splits["test"][0].task == "qa1"
    with pytest.raises(ValueError, match="unknown task 'qa9'"):
        BabiLongDataModule(tasks=["qa9"])


def test_datamodule_reads_files(tmp_path: Path) -> None:
    from llm_methods.perk.data import write_babilong

    path = write_babilong(synth_babilong(3, 2, seed=4), tmp_path / "t.jsonl")
    dm = BabiLongDataModule(train_file=str(path), val_file=str(path), test_file=str(path))
    dm.setup("fit")
    assert [r.question for r in dm.splits["train"]] == [
        r.question for r in synth_babilong(3, 2, seed=4)
    ]


def test_icr_format_and_length_error(tiny) -> None:  # type: ignore[no-untyped-def]
    import copy

    from llm_methods.lm import LMError
    from llm_methods.perk.icr import ICR, format_icr

    prompt = format_icr(["Mary went to the kitchen.", "Birds sang."], "Where is Mary?")
    assert prompt.startswith("doc_0: Mary went") and "doc_1: Birds sang.\n" in prompt
    assert prompt.endswith("You have memorized 2 documents.\nWhere is Mary?\nAnswer:")
    icr = ICR(copy.deepcopy(tiny.model), tiny.tokenizer, r=4)
    assert all("lora_" in n for n, p in icr.model.named_parameters() if p.requires_grad)
    loss = icr.loss(["Mary went to the kitchen."], "Where is Mary?", "kitchen")
    loss.backward()
    assert torch.isfinite(loss)
    with pytest.raises(LMError, match="without segmentation"):
        icr.loss(["word " * 100] * 4, "Where is Mary?", "kitchen")  # 256 positions allowed


def test_peak_memory_counts_live_tensors() -> None:
    from llm_methods.perk.memory import PeakMemory, peak_bytes

    def block() -> None:
        a = torch.ones(1000, 1000)  # 4 MB
        b = a * 2  # 8 MB live
        del a
        c = b + 1  # 8 MB live again (a was freed)
        del b, c

    with PeakMemory() as mem:
        block()
    assert mem.peak == 8_000_000 and mem.current == 0
    _, big = peak_bytes(lambda: torch.ones(2000, 1000).sum())
    assert big >= 8_000_000


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_configs_parse(path: Path) -> None:
    cfg = yaml.safe_load(path.read_text())
    assert cfg["model"]["class_path"].startswith("llm_methods.perk.lit_module.")
    from jsonargparse import ArgumentParser

    from llm_methods.perk.data import BabiLongDataModule
    from llm_methods.perk.lit_module import ICRModule, PERKModule

    module_cls = PERKModule if cfg["model"]["class_path"].endswith("PERKModule") else ICRModule
    parser = ArgumentParser()
    parser.add_class_arguments(module_cls, "model")
    parser.add_class_arguments(BabiLongDataModule, "data")
    parser.parse_object({"model": cfg["model"]["init_args"], "data": cfg["data"]["init_args"]})


@pytest.mark.parametrize("config", ["tiny", "icr_tiny"])
def test_tiny_config_fast_dev_run(config: str) -> None:
    from llm_methods.cli import main

    assert main(["perk", "fit", "--config", config, "--trainer.fast_dev_run=1"]) in (0, None)


def test_outer_loop_trains_meta_parameters() -> None:
    from llm_methods.perk.lit_module import PERKModule

    module = PERKModule(model="tiny", r=4, alpha=8, lslr_init=1e-2, lr=1e-2, max_new_tokens=4)
    opt = module.configure_optimizers()
    names = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(module.perk.lslr) in names and id(module.perk.weighter.fc1.weight) in names
    base = [p for n, p in module.perk.model.named_parameters() if "lora_" not in n]
    assert base and all(id(p) not in names for p in base)  # the base model stays frozen
    recs = synth_babilong(2, 2, tasks=("qa1",), seed=3)
    before = module.perk.lslr.detach().clone()
    module.train()
    loss = module.training_step(recs, 0)
    loss.backward()
    opt.step()
    assert not torch.equal(before, module.perk.lslr.detach())
