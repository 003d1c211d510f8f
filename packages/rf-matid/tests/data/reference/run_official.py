"""Produce ``official_rfmatid.json``: numbers from the official RF-MatID code on our fixture.

Run once, in a scratch environment with torch, numpy and transformers (not this workspace), on
a checkout of NTUMARS/RF-MatID and a fixture written by ``rf-matid synth`` (see the sidecar
``official_rfmatid.meta.json`` for the exact commands). It imports the official
``dataset/dataset.py``, ``dataset/TD_dataset.py``, ``dataset/split_config.py`` and
``model_zoo/RF_MatID.py`` and records, numbers only:

* the three-channel tensors of ``RFMatID_Freq_Dataset`` (P1 and the P4 crop) per fixture file:
  every 64th row, the last row, per-channel sums, sums of squares, minima and maxima;
* ``RF_Time_Dataset``'s z-scored ``[::3]`` amplitudes per file (same summaries);
* ``random_split`` train indices of ``Split_Spec_Generator.get_random_split(100)`` and the
  S2/S3 distance and angle lists;
* the official ``RF_MatID`` (seq_length 2048, d_model 128, 16 classes) in eval mode with its
  parameters filled by a fixed formula (``fill``: a variance-preserving initialisation drawn
  from a portable integer hash, so that the logits depend on the input), applied to the P1
  tensors: parameter names, shapes, kinds, the count, the fill's name, and the logits.

``torchvision`` is imported by ``dataset/dataset.py`` but unused there; it is stubbed while the
dataset modules are imported, so that the scratch environment does not need it.
Usage: python run_official.py OFFICIAL_REPO FIXTURE_DATASET_DIR OUT_JSON
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import torch

P4 = [[5.725, 5.85], [23.12, 23.6], [24.0, 36.0], [37.0, 42.5]]  # config_hub freq_protocol_4
ROW_STEP = 64


def summary(t: np.ndarray) -> dict:
    """t [N, C] float32 -> every ROW_STEP-th row, the last row and per-channel statistics."""
    t64 = t.astype(np.float64)
    rows = [*range(0, t.shape[0], ROW_STEP), t.shape[0] - 1]
    return {
        "shape": list(t.shape),
        "rows": rows,
        "values": t[rows].tolist(),
        "sum": t64.sum(0).tolist(),
        "sumsq": (t64**2).sum(0).tolist(),
        "min": t64.min(0).tolist(),
        "max": t64.max(0).tolist(),
    }


#: The name of the fill rule below, recorded with the logits it produced.
FILL = "variance-preserving splitmix64 (issue 39)"


def kind(name: str, shape: list[int]) -> str:
    """What ``fill`` needs to know about a parameter, from its name and shape alone: every 1-D
    ``weight`` of RF_MatID is a LayerNorm's (checked in ``main``)."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "layer_scale_parameter":
        return "layer_scale"
    if len(shape) >= 2:
        return "weight"
    return "norm_weight" if leaf == "weight" else "bias"


def uniform(k: int, n: int) -> np.ndarray:
    """n values in [0, 1): splitmix64 of (k, index), integer arithmetic only, so every machine
    and NumPy version gives the same bits (no generator stream to depend on)."""
    z = np.arange(n, dtype=np.uint64) + np.uint64(k << 40)
    z = z + np.uint64(0x9E3779B97F4A7C15)  # uint64 arrays wrap around, as splitmix64 needs
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def fill(k: int, shape: list[int], what: str) -> np.ndarray:
    """Parameter k (in named_parameters order) of ``shape``: weights uniform with variance
    1 / fan_in (fan_in = the product of the shape after the first axis: a Linear's inputs, a
    convolution's inputs per group x kernel), so activations keep their scale through the network
    and the logits depend on the input; LayerNorm weights 1 +- 0.1, layer scales 0.5 +- 0.1 (the
    ConvNeXt blocks contribute; Hugging Face's 1e-6 would silence them), biases +- 0.1."""
    n = math.prod(shape)
    signed = 2.0 * uniform(k, n) - 1.0  # uniform on [-1, 1): variance 1/3
    if what == "weight":
        return (signed * math.sqrt(3.0 / math.prod(shape[1:]))).reshape(shape)
    if what == "norm_weight":
        return (1.0 + 0.1 * signed).reshape(shape)
    if what == "layer_scale":
        return (0.5 + 0.1 * signed).reshape(shape)
    return (0.1 * signed).reshape(shape)


def main() -> None:
    repo, fixture, out = (Path(a) for a in sys.argv[1:4])
    stubs = ("torchvision", "torchvision.transforms")
    for name in stubs:  # imported by dataset/dataset.py, unused there
        sys.modules[name] = types.ModuleType(name)
    sys.path.insert(0, str(repo))
    from dataset.dataset import RFMatID_Freq_Dataset
    from dataset.split_config import Split_Spec_Generator
    from dataset.TD_dataset import RF_Time_Dataset

    for name in stubs:  # transformers probes for torchvision: let it see none
        del sys.modules[name]
    from model_zoo.RF_MatID import RF_MatID

    freq_root = str(fixture / "frequency_domain")
    result: dict = {"frequency": {}, "time": {}}
    tensors = {}
    for crop_name, crop in (("P1", None), ("P4", P4)):
        data = RFMatID_Freq_Dataset(freq_root, crop, None, "three_channel", "random_split")
        result["class_mapping"] = data.class_mapping
        for i, path in enumerate(data.data_list):
            rel = Path(path).relative_to(fixture).as_posix()
            x, y = data[i]
            entry = result["frequency"].setdefault(rel, {"label": int(y)})
            entry[crop_name] = summary(x.numpy())
            if crop_name == "P1":
                tensors[rel] = x
    time_data = RF_Time_Dataset(str(fixture / "time_domain"), None, "random_split")
    for i, path in enumerate(time_data.data_list):
        x, y = time_data[i]
        rel = Path(path).relative_to(fixture).as_posix()
        result["time"][rel] = {"label": int(y), **summary(x.numpy())}

    splits = Split_Spec_Generator()
    generator, train_size, val_size = splits.get_random_split(100)
    train, _ = torch.utils.data.random_split(range(100), [train_size, val_size], generator)
    result["random_split_100_train"] = [int(i) for i in train.indices]
    result["cross_distance"] = {
        mod: splits.get_cross_distance_split(mod) for mod in ("mod1", "mod2", "mod3")
    }
    result["cross_angle"] = {
        mod: splits.get_cross_angle_split(mod) for mod in ("mod1", "mod2", "mod3")
    }

    torch.manual_seed(0)
    model = RF_MatID(seq_length=2048, d_model=128, drop_rate=0.2, num_classes=16).eval()
    modules = dict(model.named_modules())
    params = []
    with torch.no_grad():
        for k, (name, param) in enumerate(model.named_parameters()):
            what = kind(name, list(param.shape))
            owner = type(modules[name.rsplit(".", 1)[0]]).__name__
            assert what != "norm_weight" or "LayerNorm" in owner, (name, owner)
            param.copy_(torch.from_numpy(fill(k, list(param.shape), what)).to(param.dtype))
            params.append({"name": name, "shape": list(param.shape), "kind": what})
        files = sorted(tensors)
        x = torch.stack([tensors[f] for f in files])  # [B, 2048, 3], upstream channels-last
        logits = model(x)
    result["model"] = {
        "files": files,
        "parameters": params,
        "num_parameters": int(sum(p.numel() for p in model.parameters())),
        "fill": FILL,
        "state_dict_keys": list(model.state_dict()),
        "logits": logits.double().tolist(),
    }
    result["torch"] = torch.__version__
    result["transformers"] = importlib.metadata.version("transformers")
    out.write_text(json.dumps(result, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {out}: {len(tensors)} frequency files, {len(result['time'])} time files")
    assert math.isfinite(float(logits.sum()))


if __name__ == "__main__":
    main()
