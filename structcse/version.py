"""The project's version, ``structcse.__version__``, and the code version manifests record.

Defined in :mod:`infra.version` (the lowest layer, so that ingest and train can record it); re-exported here.
"""

from infra.version import (
    __version__,
    code_version,
    describe,
    git_state,
    package_version,
    version_line,
)

__all__ = ["__version__", "code_version", "describe", "git_state", "package_version", "version_line"]
