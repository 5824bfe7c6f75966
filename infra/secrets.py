"""Keys and tokens: read from the environment (or a file a config names), never written down.

Every stage takes credentials the same way: an environment variable (the
BabelNet key ``key_env``, Hugging Face's ``HF_TOKEN``, MLflow's
``MLFLOW_TRACKING_TOKEN``, cloud credentials) or a file whose *path* a config
names. Nothing the project writes (saved configs, manifests, model cards,
metrics, Tune trial configs, cache file names, log lines) may hold one, so:

* :func:`check_no_secrets` is a config check: a value that holds the value of
  one of :data:`SECRET_ENV_VARS`, or a URL with a password in it
  (``s3://user:pass@…``, ``https://…?key=…``), is a one-line error naming the
  key (never the value), before anything runs or is saved;
* :func:`redact` is the writers' last line: every string that would be saved
  has such values replaced by ``***VAR***``.

A value shorter than 8 characters is not treated as a secret (it would match
ordinary text).
"""

from __future__ import annotations

import os
import re
from typing import Any

SECRET_ENV_VARS = (
    "BABELNET_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_PASSWORD",
    "WANDB_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "GOOGLE_API_KEY",
    "RAY_AUTH_TOKEN",
)
MIN_SECRET_LENGTH = 8
_URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]+:[^/@\s]+@", re.IGNORECASE)
_URL_KEY_PARAM = re.compile(r"[?&](?:key|api_?key|token|access_token|password|secret)=(?!\*\*\*)[^&\s]+",
                            re.IGNORECASE)


class SecretInConfigError(ValueError):
    """A config value holds a credential (named by key, never shown)."""


def secret_values(extra_env_vars: tuple[str, ...] = ()) -> dict[str, str]:
    """``{variable: value}`` of the secret variables set in this process (long enough to be secrets)."""
    out = {}
    for var in (*SECRET_ENV_VARS, *extra_env_vars):
        value = os.environ.get(var)
        if value and len(value) >= MIN_SECRET_LENGTH:
            out[var] = value
    return out


def _strings(obj: Any, path: str):
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _strings(v, f"{path}[{i}]")


def check_no_secrets(obj: Any, source: str, extra_env_vars: tuple[str, ...] = ()) -> None:
    """Raise ``SecretInConfigError`` if a string in ``obj`` holds a secret (see the module docstring)."""
    secrets = secret_values(extra_env_vars)
    for where, text in _strings(obj, ""):
        for var, value in secrets.items():
            if value in text:
                raise SecretInConfigError(
                    f"{source}: {where or 'value'} holds the value of ${var}; keys and tokens are read from the "
                    "environment (or a file the config names), never written into a config")
        if _URL_PASSWORD.search(text) or _URL_KEY_PARAM.search(text):
            raise SecretInConfigError(
                f"{source}: {where or 'value'} is a URL with a password or key in it; give the credential "
                "through the environment (e.g. AWS_SECRET_ACCESS_KEY, BABELNET_KEY), not in the URL")


def redact_text(text: str, secrets: dict[str, str] | None = None) -> str:
    secrets = secret_values() if secrets is None else secrets
    for var, value in secrets.items():
        text = text.replace(value, f"***{var}***")
    text = _URL_PASSWORD.sub(lambda m: m.group(0).split("://")[0] + "://***@", text)
    return _URL_KEY_PARAM.sub(lambda m: m.group(0).split("=")[0] + "=***", text)


def redact(obj: Any, secrets: dict[str, str] | None = None) -> Any:
    """A copy of ``obj`` (dicts, lists, tuples, strings, other values as is) with every secret replaced."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    if isinstance(obj, dict):
        return {redact(k, secrets) if isinstance(k, str) else k: redact(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(v, secrets) for v in obj)
    return obj
