"""Tests for rf_matid.lit_module: training reduces loss, OneCycle sizing, metrics, predict."""

from __future__ import annotations

import math

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from iclr26_common.testing import shipped_configs
from rf_matid.lit_module import RFMatIDClassifier

NUM_CLASSES = 4
LENGTH = 64
TINY_CNN = {"base_channels": 4, "dropout": 0.0}

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*does not have many workers:UserWarning"),
    pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no:UserWarning"),
]


def _toy_data(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Linearly separable toy spectra: class k is a tone of frequency k+1 plus noise."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % NUM_CLASSES
    t = torch.linspace(0, 2 * math.pi, LENGTH)
    tone = torch.stack([torch.cos((y + 1)[:, None] * t), torch.sin((y + 1)[:, None] * t)], dim=1)
    return tone + 0.3 * torch.randn(n, 2, LENGTH, generator=gen), y


class _DictDataset(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i]}


def _trainer(**kwargs) -> L.Trainer:
    defaults = dict(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    return L.Trainer(**{**defaults, **kwargs})


def _mean_loss(module: RFMatIDClassifier, x: torch.Tensor, y: torch.Tensor) -> float:
    module.eval()
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(module(x), y).item()
    module.train()  # Lightning >= 2.2 keeps the module's mode when fit starts
    return loss


class _LearningRates(L.Callback):
    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.lrs.append(optimizer.param_groups[0]["lr"])


def test_training_reduces_loss_on_separable_toy_problem() -> None:
    torch.manual_seed(0)
    x, y = _toy_data(96)
    module = RFMatIDClassifier(
        arch="material_id",
        num_classes=NUM_CLASSES,
        seq_len=LENGTH,
        arch_kwargs=TINY_CNN,
        lr=1e-2,
    )
    before = _mean_loss(module, x, y)
    trainer = _trainer(max_epochs=6)
    loader = DataLoader(_DictDataset(x, y), batch_size=16, shuffle=True)
    trainer.fit(module, loader, DataLoader(_DictDataset(x, y), batch_size=32))
    after = _mean_loss(module, x, y)
    assert after < 0.5 * before
    metrics = trainer.callback_metrics
    assert {"train/loss_epoch", "val/loss", "val/acc", "val/macro_f1"} <= set(metrics)
    assert metrics["val/acc"] > 0.9


def test_onecycle_total_steps_is_the_trainers_estimate() -> None:
    x, y = _toy_data(50)
    module = RFMatIDClassifier(
        arch="material_id", num_classes=NUM_CLASSES, seq_len=LENGTH, arch_kwargs=TINY_CNN
    )
    lrs = _LearningRates()
    trainer = _trainer(
        max_epochs=3, accumulate_grad_batches=2, limit_val_batches=0, callbacks=[lrs]
    )
    trainer.fit(module, DataLoader(TensorDataset(x, y), batch_size=8))  # (x, y) tuple batches
    config = trainer.lr_scheduler_configs[0]
    scheduler = config.scheduler
    assert isinstance(scheduler, torch.optim.lr_scheduler.OneCycleLR)
    assert config.interval == "step"
    # 7 batches/epoch, 2 accumulated per step -> 4 optimizer steps/epoch (last one partial)
    assert scheduler.total_steps == trainer.estimated_stepping_batches == 3 * 4
    # Stepped once per optimizer step, the whole cycle is used (upstream stops in the warm-up):
    # lr/div_factor -> lr (the peak) -> lr/(div_factor·final_div_factor).
    hp = module.hparams
    assert len(lrs.lrs) == scheduler.total_steps
    assert lrs.lrs[0] == pytest.approx(hp.lr / hp.div_factor)
    assert max(lrs.lrs) > 0.5 * hp.lr
    assert lrs.lrs[-1] == pytest.approx(hp.lr / (hp.div_factor * hp.final_div_factor))


def test_test_confusion_matrix_and_predict() -> None:
    x, y = _toy_data(40, seed=1)
    module = RFMatIDClassifier(
        arch="material_id",
        num_classes=NUM_CLASSES,
        seq_len=LENGTH,
        arch_kwargs=TINY_CNN,
        class_names=["a", "b", "c", "d"],
    )
    trainer = _trainer(max_epochs=1)
    results = trainer.test(module, DataLoader(_DictDataset(x, y), batch_size=16), verbose=False)
    confusion = module.test_confusion
    assert confusion.shape == (NUM_CLASSES, NUM_CLASSES)
    assert confusion.sum() == len(y)
    assert torch.equal(confusion.sum(dim=1), torch.bincount(y, minlength=NUM_CLASSES))
    accuracy = confusion.diag().sum().item() / len(y)
    assert results[0]["test/acc"] == pytest.approx(accuracy, abs=1e-6)

    outputs = trainer.predict(module, DataLoader(TensorDataset(x), batch_size=16))
    probs = torch.cat([o["probs"] for o in outputs])
    preds = torch.cat([o["pred"] for o in outputs])
    logits = torch.cat([o["logits"] for o in outputs])
    assert probs.shape == (len(y), NUM_CLASSES)
    assert torch.allclose(probs.sum(dim=1), torch.ones(len(y)))
    assert torch.equal(preds, logits.argmax(dim=1))
    # predictions agree with the confusion matrix columns
    assert torch.equal(torch.bincount(preds, minlength=NUM_CLASSES), confusion.sum(dim=0))


def test_step_and_constant_schedulers() -> None:
    for scheduler, expected in (("step", torch.optim.lr_scheduler.StepLR), ("none", None)):
        module = RFMatIDClassifier(arch="mlp", num_classes=3, seq_len=8, scheduler=scheduler)
        configured = module.configure_optimizers()
        if expected is None:
            assert isinstance(configured, torch.optim.AdamW)
        else:
            assert isinstance(configured["lr_scheduler"]["scheduler"], expected)
            assert configured["lr_scheduler"]["interval"] == "epoch"
            assert (
                configured["optimizer"].param_groups[0]["weight_decay"] == 1e-3
            )  # issue default (upstream RF_MatID config)


def test_checkpoint_roundtrip_with_weights_only(tmp_path) -> None:
    x, y = _toy_data(16)
    module = RFMatIDClassifier(
        arch="transformer1d",
        num_classes=NUM_CLASSES,
        seq_len=LENGTH,
        arch_kwargs={"embed_dim": 8, "num_heads": 2, "num_layers": 1, "patch_size": 4},
        class_names=["a", "b", "c", "d"],
    )
    trainer = _trainer(max_steps=1, limit_val_batches=0)
    trainer.fit(module, DataLoader(TensorDataset(x, y), batch_size=8))
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    restored = RFMatIDClassifier.load_from_checkpoint(path, weights_only=True)
    assert restored.hparams.arch_kwargs["patch_size"] == 4
    assert restored.hparams.class_names == ["a", "b", "c", "d"]
    module.eval()
    restored.eval()
    with torch.no_grad():
        assert torch.equal(module(x), restored(x))


def test_bad_configuration_raises() -> None:
    with pytest.raises(ValueError, match="unknown arch"):
        RFMatIDClassifier(arch="resnet50")
    with pytest.raises(ValueError, match="class_names has 2"):
        RFMatIDClassifier(arch="mlp", seq_len=8, num_classes=3, class_names=["a", "b"])
    with pytest.raises(ValueError, match="scheduler"):
        RFMatIDClassifier(arch="mlp", seq_len=8, scheduler="cosine")
    with pytest.raises(ValueError, match="lr must be > 0"):
        RFMatIDClassifier(arch="mlp", seq_len=8, lr=0.0)
    x, y = _toy_data(8)
    module = RFMatIDClassifier(
        arch="material_id", num_classes=NUM_CLASSES, seq_len=LENGTH, arch_kwargs=TINY_CNN
    )
    with pytest.raises(ValueError, match="finite number of training steps"):
        _trainer(max_epochs=-1).fit(module, DataLoader(TensorDataset(x, y), batch_size=8))
    with pytest.raises(ValueError, match="no labels"):
        module.training_step({"x": x}, 0)


@pytest.mark.parametrize("config", shipped_configs("rf_matid"), ids=lambda p: p.stem)
def test_shipped_config_lr_is_the_rate_the_optimizer_gets(config) -> None:
    """`lr` in a config is the OneCycle peak (StepLR: the initial rate), not an inert value."""
    import yaml

    args = yaml.safe_load(config.read_text())["model"]["init_args"]
    recipe = {k: v for k, v in args.items() if k not in ("arch", "arch_kwargs")}
    assert "max_lr" not in recipe
    module = RFMatIDClassifier(
        arch="material_id", num_classes=NUM_CLASSES, seq_len=LENGTH, arch_kwargs=TINY_CNN, **recipe
    )
    lrs = _LearningRates()
    x, y = _toy_data(80)  # 10 steps of 8: the OneCycle peak falls exactly on step 0.3·10 - 1 = 2
    _trainer(max_epochs=1, limit_val_batches=0, callbacks=[lrs]).fit(
        module, DataLoader(TensorDataset(x, y), batch_size=8)
    )
    assert len(lrs.lrs) == 10
    if module.hparams.scheduler == "onecycle":
        assert max(lrs.lrs) == pytest.approx(args["lr"], rel=1e-9)
        assert lrs.lrs[0] == pytest.approx(args["lr"] / 25)
    else:
        assert lrs.lrs[0] == pytest.approx(args["lr"], rel=1e-9)


def test_lr_changes_the_onecycle_peak() -> None:
    peaks = []
    for lr in (1e-3, 4e-3):
        module = RFMatIDClassifier(
            arch="material_id", num_classes=NUM_CLASSES, seq_len=LENGTH, arch_kwargs=TINY_CNN, lr=lr
        )
        lrs = _LearningRates()
        x, y = _toy_data(80)
        _trainer(max_epochs=1, limit_val_batches=0, callbacks=[lrs]).fit(
            module, DataLoader(TensorDataset(x, y), batch_size=8)
        )
        peaks.append(max(lrs.lrs))
    assert peaks == pytest.approx([1e-3, 4e-3])


def test_checkpoint_with_other_classes_is_refused_before_loading_weights() -> None:
    module = RFMatIDClassifier(arch="mlp", num_classes=3, seq_len=8, class_names=["a", "b", "c"])
    same = {"hyper_parameters": {"num_classes": 3, "class_names": ["a", "b", "c"]}}
    module.on_load_checkpoint(same)  # no error
    for other in (
        {"num_classes": 3, "class_names": ["a", "c", "b"]},  # same set, other order
        {"num_classes": 4, "class_names": ["a", "b", "c", "d"]},
        {"num_classes": 4},
    ):
        with pytest.raises(ValueError, match="class vocabulary mismatch"):
            module.on_load_checkpoint({"hyper_parameters": other})


def test_num_parameters_uses_the_model_module_count(monkeypatch) -> None:
    import rf_matid.lit_module as lit_module
    from rf_matid.model import count_parameters

    module = RFMatIDClassifier(arch="mlp", num_classes=3, seq_len=8)
    assert module.num_parameters() == count_parameters(module.model) > 0
    monkeypatch.setattr(lit_module, "count_parameters", lambda model: -1)
    assert module.num_parameters() == -1  # one definition: lit_module delegates to model.py


def test_test_predictions_are_the_predict_pass_and_the_fit_validation_is_validate() -> None:
    """`rf-matid benchmark` (issue 39 budget) scores each test spectrum from the test run's own
    predictions (`test_predictions`) and takes the validation accuracy the fit logged after its
    last step, instead of a predict pass and a validate pass; both must equal those passes."""
    from rf_matid.benchmark import last_validation_callback, validation_accuracy

    x, y = _toy_data(40, seed=2)
    loader = DataLoader(_DictDataset(x, y), batch_size=16)
    module = RFMatIDClassifier(
        arch="material_id", num_classes=NUM_CLASSES, seq_len=LENGTH, arch_kwargs=TINY_CNN
    )
    last = last_validation_callback()
    trainer = _trainer(max_epochs=2, callbacks=[last])
    trainer.fit(module, loader, loader)
    logged = validation_accuracy(trainer, module, None, last)
    validated = trainer.validate(module, loader, verbose=False)[0]["val/acc"]
    assert logged == float(validated)
    # the shortcut is taken only when the fit validated after its last step: a model trained
    # further after that validation (here a step moved by hand) is validated again
    last.step -= 1
    assert validation_accuracy(trainer, module, loader_module(loader), last) == float(validated)

    trainer.test(module, loader, verbose=False)
    outputs = trainer.predict(module, DataLoader(TensorDataset(x), batch_size=16))
    predicted = torch.cat([o["pred"] for o in outputs])
    assert torch.equal(module.test_predictions, predicted)
    # a second test run replaces them (not appended): the mutation this guards
    trainer.test(module, loader, verbose=False)
    assert torch.equal(module.test_predictions, predicted)


def loader_module(loader: DataLoader) -> L.LightningDataModule:
    """A data module whose validation loader is ``loader``."""
    return L.LightningDataModule.from_datasets(val_dataset=loader.dataset, batch_size=16)
