"""A fake OpenAI-compatible embeddings server and the deterministic embedding it serves.

``POST {base_path}/embeddings`` (``base_path`` default ``/v1``; use
``server.base_url`` as the client's embeddings base URL) with
``{"model", "input", "encoding_format"?, "dimensions"?}``:

* ``input``: a non-empty string or a non-empty list (<= 2048) of non-empty
  strings.  (Token-id arrays, which OpenAI accepts, are rejected by the fake.)
* answer ``200 {"object": "list", "data": [{"object": "embedding", "index": i,
  "embedding": [...]}], "model": <model>, "usage": {"prompt_tokens": n,
  "total_tokens": n}}`` with ``n`` the number of ``\\w+`` words (>= 1 per input).
* ``encoding_format``: ``"float"`` (default) or ``"base64"`` (little-endian
  float32, as OpenAI); anything else -> 400.
* ``dimensions``: optional; <= the model's dimension truncates and
  re-normalizes (OpenAI's v3 behaviour); larger -> 400.

Errors use OpenAI's envelope ``{"error": {"message", "type", "param", "code"}}``:
401 ``invalid_api_key`` for a missing/wrong ``Authorization: Bearer`` key when
``api_key`` is set, 404 ``model_not_found`` for an unknown model, 400
``invalid_request_error`` for everything malformed.  ``GET {base_path}/models``
lists the models.

The vectors come from :func:`embed_text`, a hashed bag of words: each
casefolded ``\\w+`` word adds +-1 (sign and slot from BLAKE2b of the word) to
one of ``dimension`` slots, then the vector is L2-normalized.  Texts sharing
words therefore have a higher cosine similarity; texts sharing none are close
to 0.  Tests build Qdrant fixture vectors with the same function.
"""

from __future__ import annotations

import array
import base64
import hashlib
import math
import re
import sys
import threading
from typing import Any, Callable, Mapping

from .http_fake import FakeServer, RecordedRequest, Response

__all__ = ["FakeEmbeddings", "embed_text", "cosine"]

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_INPUTS = 2048


def _slot(token: str, dimension: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    n = int.from_bytes(digest, "little")
    return n % dimension, (1.0 if (n >> 63) & 1 == 0 else -1.0)


def embed_text(text: str, dimension: int = 1024) -> list[float]:
    """Deterministic unit vector of ``text`` (hashed bag of casefolded words).

    A text without any word is hashed as a whole so that it still gets a unit
    vector.  Same text, same dimension -> the same list of floats, on every
    platform and run.
    """
    if dimension < 1:
        raise ValueError("dimension must be >= 1")
    vec = [0.0] * dimension
    tokens = _WORD.findall(text.casefold()) or ["\x00" + text]
    for token in tokens:
        idx, sign = _slot(token, dimension)
        vec[idx] += sign
    norm = math.sqrt(math.fsum(x * x for x in vec))
    if norm == 0:  # every word cancelled out: fall back to the whole text
        idx, sign = _slot("\x00" + text, dimension)
        vec = [0.0] * dimension
        vec[idx] = sign
        norm = 1.0
    return [x / norm for x in vec]


def cosine(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two equal-length vectors (0.0 if either is zero)."""
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(x * x for x in b))
    if na == 0 or nb == 0:
        return 0.0
    return math.fsum(x * y for x, y in zip(a, b)) / (na * nb)


def _words(text: str) -> int:
    return max(1, len(_WORD.findall(text)))


class FakeEmbeddings(FakeServer):
    """OpenAI-compatible embeddings double.

    Constructor:
        ``api_key``: required bearer key (``None``: no auth).
        ``models``: model name -> dimension (default ``{"bge-m3": 1024}``).
        ``base_path``: route prefix (default ``"/v1"``).
        ``embed``: ``(text, dimension) -> list[float]`` (default :func:`embed_text`).

    Mutable knobs:
        ``response_dimension``: return vectors of this length instead (to test
        a client's dimension check); ``overrides``: text -> vector returned
        verbatim; ``reverse_order``: return ``data`` in reverse order (indexes
        stay correct); ``drop_last``: omit the last item of ``data``.

    Hooks: ``inputs`` (every text embedded, in order), ``base_url``.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        models: Mapping[str, int] | None = None,
        base_path: str = "/v1",
        embed: Callable[[str, int], list[float]] = embed_text,
    ) -> None:
        super().__init__()
        self.api_key = api_key
        self.models: dict[str, int] = dict(models or {"bge-m3": 1024})
        self.base_path = "/" + base_path.strip("/") if base_path.strip("/") else ""
        self.embed = embed
        self.response_dimension: int | None = None
        self.overrides: dict[str, list[float]] = {}
        self.reverse_order = False
        self.drop_last = False
        self._inputs: list[str] = []
        self._inputs_lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """The URL a client configures as its embeddings base (``…/v1``)."""
        return self.url + self.base_path

    @property
    def inputs(self) -> list[str]:
        with self._inputs_lock:
            return list(self._inputs)

    # ---------------------------------------------------------------- errors
    @staticmethod
    def _error(
        status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
        code: str | None = None,
    ) -> Response:
        return Response.json(
            {"error": {"message": message, "type": type_, "param": param, "code": code}}, status
        )

    def error_response(self, status: int, message: str) -> Response:
        type_ = {429: "rate_limit_error", 401: "invalid_request_error"}.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        return self._error(status, message, type_)

    # ---------------------------------------------------------------- routes
    def handle_request(self, req: RecordedRequest) -> Response:
        if self.api_key is not None:
            auth = req.header("authorization")
            if not auth:
                return self._error(
                    401,
                    "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                )
            if auth != f"Bearer {self.api_key}":
                return self._error(401, "Incorrect API key provided.", code="invalid_api_key")
        if req.path == f"{self.base_path}/models" and req.method == "GET":
            return Response.json(
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                        for m in self.models
                    ],
                }
            )
        if req.path != f"{self.base_path}/embeddings":
            return self._error(404, f"Invalid URL ({req.method} {req.path})")
        if req.method != "POST":
            return self._error(405, f"Invalid method for URL ({req.method} {req.path})")
        return self._embeddings(req)

    def _embeddings(self, req: RecordedRequest) -> Response:
        if not req.json_ok or not isinstance(req.json, dict):
            return self._error(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you "
                "aren't using your HTTP library correctly.)",
            )
        body: dict[str, Any] = req.json
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return self._error(400, "you must provide a model parameter", param="model")
        if model not in self.models:
            return self._error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        raw = body.get("input")
        texts: list[str]
        if isinstance(raw, str):
            texts = [raw]
        elif isinstance(raw, list) and all(isinstance(t, str) for t in raw):
            texts = list(raw)
        else:
            texts = []
        if not texts or any(t == "" for t in texts) or len(texts) > MAX_INPUTS:
            return self._error(
                400,
                "'$.input' is invalid. Please check the API reference: "
                "https://platform.openai.com/docs/api-reference.",
                param="input",
            )
        fmt = body.get("encoding_format", "float")
        if fmt not in (None, "float", "base64"):
            return self._error(
                400,
                f"Invalid value for 'encoding_format': '{fmt}'. Supported values are: 'float' and 'base64'.",
                param="encoding_format",
            )
        dimension = self.models[model]
        dims = body.get("dimensions")
        if dims is not None:
            if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= dimension:
                return self._error(400, "This model does not support specifying dimensions.", param="dimensions")
        with self._inputs_lock:
            self._inputs.extend(texts)
        data = []
        for i, text in enumerate(texts):
            if text in self.overrides:
                vec = list(self.overrides[text])
            else:
                vec = self.embed(text, self.response_dimension or dimension)
                if dims is not None and dims < len(vec):
                    vec = vec[:dims]
                    norm = math.sqrt(math.fsum(x * x for x in vec)) or 1.0
                    vec = [x / norm for x in vec]
            embedding: Any = vec
            if fmt == "base64":
                arr = array.array("f", vec)
                if sys.byteorder != "little":
                    arr.byteswap()
                embedding = base64.b64encode(arr.tobytes()).decode("ascii")
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        if self.reverse_order:
            data.reverse()
        if self.drop_last and data:
            data.pop()
        tokens = sum(_words(t) for t in texts)
        return Response.json(
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
