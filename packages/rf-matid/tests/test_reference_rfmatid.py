"""Reference check against the official RF-MatID code (NTUMARS/RF-MatID, commit in the sidecar).

``tests/data/reference/official_rfmatid.json`` holds numbers produced once by the official
``RFMatID_Freq_Dataset`` / ``RF_Time_Dataset`` loaders, ``Split_Spec_Generator`` and ``RF_MatID``
model (``run_official.py`` next to it; commands and versions in ``official_rfmatid.meta.json``)
on a fixture that our generator writes in the released format (``rf-matid synth
--upstream-header``). Here the same fixture is regenerated and read by our pipeline, and our
three-channel tensors, time-domain z-scores, splits and RF_MatID logits must equal the official
ones (to float32 round-off: upstream whitens in float32, we in float64).

The logits come from both models with every parameter set by ``run_official.fill`` (its name is
stored with the logits): a variance-preserving initialisation from an integer hash, under which
the four fixture spectra give logits far apart (issue 39: the earlier small-sine fill gave
logits within 8.6e-8 of each other whatever the input, so a port that multiplied the spectrum
by 0 or 3 passed).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from rf_matid.data import frequency_channel, three_channel
from rf_matid.io import UPSTREAM_FREQ_HEADER, load_dataset
from rf_matid.model import complex_whiten
from rf_matid.protocols import protocol_mask
from rf_matid.rfmatid_net import RFMatIDNet
from rf_matid.splits import SPLITS, make_split

REFERENCE = Path(__file__).parent / "data" / "reference"
OFFICIAL = json.loads((REFERENCE / "official_rfmatid.json").read_text())
META = json.loads((REFERENCE / "official_rfmatid.meta.json").read_text())
# The parameters of Hugging Face ConvNextModel's pooler LayerNorm, which RF_MatID never uses;
# our port leaves them out (README, Deviations).
DROPPED = (
    "spatial_feature_extractor.convnext.layernorm.weight",
    "spatial_feature_extractor.convnext.layernorm.bias",
)
# The mutation of the logits check: this parameter left at our initialisation (not mapped).
UNMAPPED = "spatial_feature_extractor.convnext.encoder.stages.2.layers.8.layer_scale_parameter"


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture of the sidecar's ``fixture_command``, regenerated with the same arguments."""
    from rf_matid.synth_dataset import generate_dataset

    spec = META["fixture"]
    root = tmp_path_factory.mktemp("reference") / "RFMatID_Dataset"
    generate_dataset(
        root,
        classes=spec["classes"],
        distances_mm=spec["distances_mm"],
        angles_deg=spec["angles_deg"],
        samples_per_position=spec["samples_per_position"],
        seed=spec["seed"],
        write_time=True,
        freq_header=UPSTREAM_FREQ_HEADER,
    )
    return root


@pytest.fixture(scope="module")
def ours(fixture_root: Path) -> dict[str, dict[str, np.ndarray]]:
    """Our three-channel tensors, channels-last [L, 3] as upstream, per file and protocol."""
    data = load_dataset(fixture_root, use_cache=False)
    axis = np.asarray(data.axis)
    out: dict[str, dict[str, np.ndarray]] = {}
    for row, rel in enumerate(data.files):
        out[rel] = {}
        for protocol in ("P1", "P4"):
            mask = protocol_mask(axis, protocol)
            x = complex_whiten(np.asarray(data.x[row])[None, mask])
            out[rel][protocol] = three_channel(x, frequency_channel(axis[mask]))[0].T.numpy()
    return out


# Tolerances: relative errors (iclr26_common.testing), measured on an AMD EPYC (avx2 + avx512),
# 2026-12-06, over ATEN_CPU_CAPABILITY=default (+ MKL_CBWR=COMPATIBLE), avx2, avx512, nothing set,
# one and two threads, and default with ONEDNN_MAX_CPU_ISA=SSE41, OPENBLAS_CORETYPE=Prescott and
# NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL (NumPy's baseline kernels):
# - the tensors and z-scores (NumPy float64, rounded to float32): identical bits under every
#   setting; what remains is ours against upstream's float32 whitening, per column at most
#   2.9e-7 (rows), 2.8e-7 (extrema), 5.8e-7 (sums of squares), 1.0e-7 (sums, scaled as below);
# - the RF_MatID logits (issue 39's variance-preserving fill; logits of size ~1), measured
#   2026-12-06 on the same machine, one thread, nothing set / ATEN_CPU_CAPABILITY=default with
#   MKL_CBWR=COMPATIBLE / avx2: 1.1e-6 / 1.6e-6 / 1.0e-6 against the official ones (1.6e-6
#   between the settings). Tolerance 2e-5, ~12x the largest.
# Tensor tolerance ~10x the largest. The mutations below (a formula or a parameter of the defect
# each check exists for) move the numbers by >= 10x the tolerance (measured: whitening with the
# biased covariance 2.4e-4, z-scores with ddof 0 1.5e-4; logits: the unmapped layer scale 0.19,
# Re/Im x 0 0.61, Re/Im x 3 0.53, i.e. 9,600x to 31,000x LOGIT_TOL; the four inputs' official
# logits differ from each other by 0.021 to 0.21, >= 1,000x LOGIT_TOL).
TENSOR_TOL = 6e-6
LOGIT_TOL = 2e-5


def assert_matches(actual: np.ndarray, summary: dict, what: str) -> None:
    """actual [N, C] against the official summary (rows, sums, sums of squares, extrema), each
    column relative to its own magnitude; a column sum relative to sqrt(N · sum of squares), the
    largest sum N values of that size can have (z-scored columns sum to ~0)."""
    assert list(actual.shape) == summary["shape"]
    a64 = actual.astype(np.float64)
    rows = actual[summary["rows"]]
    scale = np.sqrt(a64.shape[0] * np.asarray(summary["sumsq"]))
    for c in range(a64.shape[1]):
        col = f"{what} column {c}"
        values = np.asarray(summary["values"])[:, c]
        assert_portable_close(rows[:, c], values, tol=TENSOR_TOL, what=f"{col} rows")
        sumsq = (a64[:, c] ** 2).sum()
        assert_portable_close(sumsq, summary["sumsq"][c], tol=TENSOR_TOL, what=f"{col} sumsq")
        extrema = [a64[:, c].min(), a64[:, c].max()]
        expected = [summary["min"][c], summary["max"][c]]
        assert_portable_close(extrema, expected, tol=TENSOR_TOL, what=f"{col} min, max")
        sum_error = abs(a64[:, c].sum() - summary["sum"][c]) / scale[c]
        assert sum_error <= TENSOR_TOL, f"{col} sum: scaled error {sum_error:.3g}"


def assert_mutation_moves_rows(mutated: np.ndarray, summary: dict, what: str) -> None:
    """The mutated tensor's sampled rows (every column) lie >= 10x TENSOR_TOL from upstream's."""
    expected = np.asarray(summary["values"])
    for c in range(mutated.shape[1]):
        assert_mutation_detected(
            mutated[summary["rows"], c], expected[:, c], tol=TENSOR_TOL, what=f"{what} column {c}"
        )


def biased(z: np.ndarray) -> np.ndarray:
    """What the population (co)variance (/N) instead of the unbiased one (/(N-1)) gives: z-scores
    and whitened values ``sqrt(N / (N - 1))`` times larger (N = 938 to 3414: 1.5e-4 to 5.3e-4)."""
    n = z.shape[0]
    return z * np.sqrt(n / (n - 1))


def test_the_sidecar_names_the_official_commit() -> None:
    assert META["repository"] == "NTUMARS/RF-MatID"
    assert len(META["commit"]) == 40 and all(c in "0123456789abcdef" for c in META["commit"])
    assert "run_official.py" in META["command"] and "--upstream-header" in META["fixture_command"]


def test_three_channel_tensors_equal_the_official_loader(ours: dict) -> None:
    """freq_data_type three_channel: [f GHz, whitened Re, whitened Im], P1 and the P4 crop."""
    assert sorted(ours) == sorted(OFFICIAL["frequency"])
    for rel, official in OFFICIAL["frequency"].items():
        for protocol in ("P1", "P4"):
            summary = official[protocol]
            assert_matches(ours[rel][protocol], summary, f"{rel} {protocol}")
            # the whitening with the biased covariance: the whitened columns move by >= 1.5e-4
            whitened = ours[rel][protocol][:, 1:]
            whitened_summary = {**summary, "values": np.asarray(summary["values"])[:, 1:]}
            assert_mutation_moves_rows(biased(whitened), whitened_summary, f"{rel} whitened")
            # the frequency channel is upstream's float32 arithmetic exactly (float64 Hz / 1e9
            # rounded to float32 would differ by up to 4e-6 GHz)
            frequencies = np.asarray(summary["values"], dtype=np.float32)[:, 0]
            np.testing.assert_array_equal(ours[rel][protocol][summary["rows"], 0], frequencies)


def test_labels_follow_the_official_class_mapping(fixture_root: Path) -> None:
    from rf_matid.classes import label_indices

    data = load_dataset(fixture_root, use_cache=False)
    labels, vocabulary = label_indices(list(data.class_names), "all_classes")
    assert {name: i for i, name in enumerate(vocabulary)} == OFFICIAL["class_mapping"]
    for rel, label in zip(data.files, labels, strict=True):
        assert OFFICIAL["frequency"][rel]["label"] == label


def test_time_domain_zscores_equal_the_official_loader(fixture_root: Path) -> None:
    data = load_dataset(fixture_root, "time", use_cache=False)
    assert sorted(data.files) == sorted(OFFICIAL["time"])
    for row, rel in enumerate(data.files):
        z = np.asarray(data.x[row])[:, None]
        assert_matches(z, OFFICIAL["time"][rel], rel)
        # z-scored with the population std (ddof 0) instead of upstream's ddof 1
        assert_mutation_moves_rows(biased(z), OFFICIAL["time"][rel], rel)


def test_splits_equal_the_official_split_generator() -> None:
    n = 100
    parts = make_split(np.full(n, 200), np.zeros(n), "S1", 0)
    assert parts["train"].tolist() == sorted(OFFICIAL["random_split_100_train"])
    for key, table in (("cross_distance", "distances"), ("cross_angle", "angles")):
        ours = SPLITS["S2" if key == "cross_distance" else "S3"]
        for mod, official in OFFICIAL[key].items():
            mine = ours[int(mod.removeprefix("mod"))]
            assert list(mine["train"]) == official["train_dataset"]["data_form"][table]
            assert list(mine["test"]) == official["val_dataset"]["data_form"][table]


def _run_official_module():
    spec = importlib.util.spec_from_file_location("run_official", REFERENCE / "run_official.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rf_matid_layout_equals_the_official_model() -> None:
    model = RFMatIDNet(in_channels=3, num_classes=16, seq_len=2048, d_model=128, drop_rate=0.2)
    official = [(p["name"], p["shape"]) for p in OFFICIAL["model"]["parameters"]]
    kept = [(name, shape) for name, shape in official if name not in DROPPED]
    assert [(n, list(p.shape)) for n, p in model.named_parameters()] == kept
    assert list(model.state_dict()) == [
        k for k in OFFICIAL["model"]["state_dict_keys"] if k not in DROPPED
    ]
    assert sum(p.numel() for p in model.parameters()) == OFFICIAL["model"]["num_parameters"] - 768


def _official_logits(
    ours: dict, unmapped: str | None = None, signal_scale: float = 1.0
) -> np.ndarray:
    """Our RF_MatID's logits with every parameter set by the sidecar's fill rule at its official
    position (``unmapped``: one parameter left at our initialisation; ``signal_scale``: the
    whitened Re/Im channels multiplied by it; the mutation checks)."""
    fill = _run_official_module().fill
    with torch.random.fork_rng():  # the unmapped parameter's initialisation: seeded, no trace
        torch.manual_seed(0)
        model = RFMatIDNet(in_channels=3, num_classes=16, seq_len=2048, d_model=128, drop_rate=0.2)
    mine = dict(model.named_parameters())
    with torch.no_grad():
        for k, entry in enumerate(OFFICIAL["model"]["parameters"]):
            if entry["name"] in DROPPED or entry["name"] == unmapped:
                continue
            param = mine[entry["name"]]
            values = fill(k, entry["shape"], entry["kind"])
            param.copy_(torch.from_numpy(values).to(param.dtype))
        files = OFFICIAL["model"]["files"]
        x = torch.from_numpy(np.stack([ours[f]["P1"].T for f in files]))  # [B, 3, 2048]
        x[:, 1:] *= signal_scale
        return model.eval()(x).double().numpy()


def test_the_fill_makes_the_official_logits_depend_on_the_input() -> None:
    """The logits of the four fixture spectra differ from each other by far more than the
    tolerance, so the check below sees what the model does with its input. HEAD d9942d3's fill
    (0.03 sin patterns) gave logits of the four inputs within 8.6e-8 of each other, below its
    tolerance: a port that ignored the spectrum passed."""
    module = _run_official_module()
    assert OFFICIAL["model"]["fill"] == module.FILL
    for entry in OFFICIAL["model"]["parameters"]:
        assert entry["kind"] == module.kind(entry["name"], entry["shape"]), entry["name"]
    expected = np.asarray(OFFICIAL["model"]["logits"])
    for i in range(len(expected)):
        for j in range(i):
            assert_mutation_detected(
                expected[i], expected[j], tol=LOGIT_TOL, what=f"official logits {i} vs {j}"
            )


def test_rf_matid_logits_equal_the_official_model(ours: dict) -> None:
    """Both models get the same parameters (the sidecar's fill rule, by official position) and
    our pipeline's tensors; the official logits came from the official pipeline's tensors."""
    expected = np.asarray(OFFICIAL["model"]["logits"])
    assert_portable_close(_official_logits(ours), expected, tol=LOGIT_TOL, what="logits")
    # the defect this guards against: a parameter that does not reach its official counterpart
    # (here the last stage's last layer scale left at our initialisation)
    unmapped = _official_logits(ours, unmapped=UNMAPPED)
    assert_mutation_detected(unmapped, expected, tol=LOGIT_TOL, what=f"{UNMAPPED} unmapped")
    # a model that ignores the spectrum (Re, Im x 0) or misscales it (x 3) fails: under HEAD
    # d9942d3's fill both passed this check
    for scale in (0.0, 3.0):
        mutated = _official_logits(ours, signal_scale=scale)
        assert_mutation_detected(mutated, expected, tol=LOGIT_TOL, what=f"Re, Im x {scale:g}")
