"""Local S3 (and SNS, IAM) over HTTP: moto's threaded server on a free loopback port."""

from __future__ import annotations

import logging

from moto.server import ThreadedMotoServer

from local_mode.aws.local_clients import local_client
from local_mode.aws.network import LOOPBACK


class MotoEndpoint:
    """moto's server on 127.0.0.1; every AWS service moto knows answers on the same URL."""

    def __init__(self) -> None:
        self._server = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
        self.url = ""

    def start(self) -> "MotoEndpoint":
        # werkzeug logs every request at INFO: in the demo that would bury the training log.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> "MotoEndpoint":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def create_buckets(self, names: list[str]) -> None:
        s3 = local_client("s3", self.url)
        for name in names:
            s3.create_bucket(Bucket=name)
