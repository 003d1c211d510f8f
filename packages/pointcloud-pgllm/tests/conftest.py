from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

SMALL_CLASSES = ["airplane", "bottle", "chair", "cup", "stool", "table"]


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The encoders are many small kernels; on the shared 2-core machine one thread is faster."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def chat_server() -> Iterator[tuple[str, list, list]]:
    """A local OpenAI-compatible chat endpoint: ``(url, replies, seen)``. Each request body is
    appended to ``seen``; the answer is the next queued string of ``replies`` (``"garbage"``
    when none is left) or, where that entry is callable, ``entry(prompt)`` of the request's
    first message, for this and every later request (the entry stays queued)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    replies: list = []
    seen: list = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            if replies and callable(replies[0]):
                answer = replies[0](body["messages"][0]["content"])
            else:
                answer = replies.pop(0) if replies else "garbage"
            data = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": answer}}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield url, replies, seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def small_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ModelNet-like OFF tree: 6 classes x (5 train, 3 test), every 4th header glued."""
    from pointcloud_pgllm.synth import generate_dataset

    root = tmp_path_factory.mktemp("pgllm") / "tree"
    return generate_dataset(root, SMALL_CLASSES, n_train=5, n_test=3, seed=1, glued_fraction=0.25)
