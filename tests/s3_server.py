"""moto's S3 API server on 127.0.0.1: a real HTTP S3 endpoint (not a mock of the client) for the tests
(``conftest.s3_server``) and ``bench/cloud.py``."""

from __future__ import annotations

import logging
import os


def start_s3_server(bucket: str, key_id: str, secret: str):
    """Start the server, point this process's environment at it (``AWS_ENDPOINT_URL_S3``, which fsspec/s3fs,
    pyarrow and boto3 all read; Ray's workers inherit it when Ray starts after this) and create ``bucket``.
    Returns (server, endpoint URL); ``server.stop()`` ends it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(AWS_ENDPOINT_URL_S3=endpoint, AWS_ACCESS_KEY_ID=key_id, AWS_SECRET_ACCESS_KEY=secret,
                      AWS_DEFAULT_REGION="us-east-1")
    import boto3

    boto3.client("s3").create_bucket(Bucket=bucket)
    return server, endpoint
