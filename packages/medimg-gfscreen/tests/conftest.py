from __future__ import annotations

import warnings
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message=".*Num foregrounds 0.*")


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
    """The data module's on-disk cache (PersistentDataset) goes to a temporary folder, not to
    the user's workspace cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ICLR26_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six small synthetic cases (64x64x32) with a datalist; at least one healthy."""
    from medimg_gfscreen.synth import generate_dataset

    root = tmp_path_factory.mktemp("synth") / "data"
    generate_dataset(root, n_cases=6, shape=(64, 64, 32), seed=3, val_fraction=0.34)
    return root


@pytest.fixture(scope="session")
def tiny_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Exported weights of an untrained tiny module (the tiny config's architecture)."""
    import torch

    from medimg_gfscreen.lit_module import GFScreenModule
    from medimg_gfscreen.settings import module_kwargs

    torch.manual_seed(0)
    module = GFScreenModule(**module_kwargs(TINY_MODEL))
    path = tmp_path_factory.mktemp("weights") / "tiny.pt"
    torch.save(module.export_weights(), path)
    return path


TINY_MODEL = {
    "focus": {"arch": "unet", "unet_channels": (8, 16, 32, 64)},
    "glance": {"widths": (8, 16, 32, 64), "conv1_stride": 2},
    "inference": {"overlap": 0.5, "threshold": 0.0},
    "roi_size": (32, 32, 16),
    "num_samples": 2,
}


def _predict_args(images: Path, masks: Path, root: Path, *extra: str) -> list[str]:
    """``predict --config tiny`` on the images in ``images``, masks into ``masks``."""
    return [
        "predict",
        "--config",
        "tiny",
        "--data.init_args.datalist=unused.json",
        f"--data.init_args.predict_dir={images}",
        f"--data.init_args.output_dir={masks}",
        f"--trainer.default_root_dir={root}",
        "--trainer.enable_progress_bar=false",
        *extra,
    ]


@pytest.fixture
def predict_args():  # type: ignore[no-untyped-def]
    """Builds the argument list of a tiny ``predict`` run (promise and user-data tests)."""
    return _predict_args
