"""pointcloud-pgllm: PGLLM's point-graph guidance and label propagation for 3-D recognition and
OOD detection (see README.md).

The main classes and functions are exported here and imported on first use, so ``import
pointcloud_pgllm`` stays cheap (torch loads when an encoder, the data module or the pipeline is
touched)::

    import pointcloud_pgllm as pg

    pg.generate_dataset("shapes", n_train=4, n_test=3)
    result = pg.classify("shapes", options=pg.PipelineOptions(n_points=256, graph_k=4))
"""

from iclr26_common.exports import distribution_version, lazy_exports

__version__ = distribution_version("pointcloud-pgllm")

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    # the pipeline on a dataset
    "PipelineOptions": "pointcloud_pgllm.api",
    "classify": "pointcloud_pgllm.api",
    "detect_ood": "pointcloud_pgllm.api",
    "encode_clouds": "pointcloud_pgllm.api",
    "PGLLMResult": "pointcloud_pgllm.results",
    "write_results": "pointcloud_pgllm.results",
    "PGLLMInputError": "pointcloud_pgllm.errors",
    # data
    "load_dataset": "pointcloud_pgllm.io",
    "PointCloudSet": "pointcloud_pgllm.io",
    "generate_dataset": "pointcloud_pgllm.synth",
    "synthetic_clouds": "pointcloud_pgllm.synth",
    "read_features": "pointcloud_pgllm.pointllm_io",
    "read_pointllm_captions": "pointcloud_pgllm.pointllm_io",
    # the pieces
    "PointNN": "pointcloud_pgllm.model",
    "encode": "pointcloud_pgllm.model",
    "load_encoder": "pointcloud_pgllm.model",
    "GeometricCaptioner": "pointcloud_pgllm.captions",
    "TfidfScorer": "pointcloud_pgllm.scorers",
    "LikelihoodScorer": "pointcloud_pgllm.scorers",
    "HTTPChatScorer": "pointcloud_pgllm.scorers",
    "PGLLMConfig": "pointcloud_pgllm.pipeline",
    "pgllm_scores": "pointcloud_pgllm.pipeline",
    "evaluate": "pointcloud_pgllm.pipeline",
    "build_graph": "pointcloud_pgllm.graph",
    "propagate": "pointcloud_pgllm.graph",
    # training the encoder
    "PointCloudClassifier": "pointcloud_pgllm.lit_module",
    "PointCloudDataModule": "pointcloud_pgllm.data",
}

__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
