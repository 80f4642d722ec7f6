"""Request bodies to feature rows and scores to response bodies, for the inference handler.

Requests: `application/json` as `{"instances": [[f1, ..., fN], ...]}` (one list of raw feature values per document,
value i being LETOR feature i + 1), or LETOR text (`text/plain`, `text/x-libsvm`: `label [qid:Q] index:value ...`
rows, read as training reads them; the label is required by the format and ignored). Responses: `application/json`
`{"scores": [...]}` (the default), or `text/plain` / `text/csv` with one score per line; in request row order.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from ranker.data import channels

JSON = "application/json"
LETOR_TYPES = ("text/plain", "text/x-libsvm")
TEXT_RESPONSE_TYPES = ("text/plain", "text/csv")
REQUEST = "request body"


def decode(body: str | bytes, content_type: str | None) -> np.ndarray:
    """`[rows, features]` float32 features of a request body."""
    media_type = _media_type(content_type) or JSON
    if media_type == JSON:
        return features_from_json(body)
    if media_type in LETOR_TYPES:
        return features_from_letor(body)
    raise ValueError(f"Content-Type: {content_type!r} is not accepted; send {JSON} "
                     f"({{\"instances\": [[features...], ...]}}) or LETOR text as {' or '.join(LETOR_TYPES)}")


def encode(scores: np.ndarray, accept: str | None) -> str:
    media_type = _media_type(accept)
    if media_type in (None, "*/*", JSON):
        return json.dumps({"scores": scores.tolist()})
    if media_type in TEXT_RESPONSE_TYPES:
        return "".join(f"{score!r}\n" for score in scores.tolist())
    raise ValueError(f"Accept: {accept!r} is not offered; ask for {JSON} or {' or '.join(TEXT_RESPONSE_TYPES)}")


def features_from_json(body: str | bytes) -> np.ndarray:
    try:
        request = json.loads(body)
    except ValueError as error:
        raise ValueError(f"{REQUEST}: not JSON ({error}); send {{\"instances\": [[features...], ...]}}") from error
    instances = request.get("instances") if isinstance(request, dict) else None
    if not isinstance(instances, list) or not instances:
        raise ValueError(f"instances: expected a non-empty list of feature rows, got {_shown(instances)}; send "
                         "{\"instances\": [[f1, f2, ...], ...]}, one row of raw feature values per document")
    for number, row in enumerate(instances):
        if not isinstance(row, list) or not row:
            raise ValueError(f"instances[{number}]: expected a list of feature values, got {_shown(row)}")
        if len(row) != len(instances[0]):
            raise ValueError(f"instances[{number}]: has {len(row)} values but instances[0] has {len(instances[0])}; "
                             "every row needs the same features (absent ones as 0)")
        for column, value in enumerate(row):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ValueError(f"instances[{number}][{column}]: {_shown(value)} is not a finite number")
    return np.asarray(instances, dtype=np.float32)


def features_from_letor(body: str | bytes) -> np.ndarray:
    """The rows of LETOR text, through the training data reader (a file is what it reads), in request order."""
    text = body.encode() if isinstance(body, str) else bytes(body)
    with tempfile.TemporaryDirectory(prefix="ranker-request-") as folder:
        path = Path(folder) / "request.letor"
        path.write_bytes(text)
        try:
            return channels.read_letor_rows(path).features
        except ValueError as error:  # the reader names its file: name the request instead
            raise ValueError(str(error).replace(str(path), REQUEST)) from None


def _media_type(header: str | None) -> str | None:
    return header.split(";", 1)[0].strip().lower() or None if header else None


def _shown(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
