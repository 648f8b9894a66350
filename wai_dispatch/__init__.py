"""wai-dispatch: a decoder for learned image codecs that dispatches each decode to a unit under
the determinism tier it needs, and reports the choice (WAI Neural Dispatch).

The sub-packages live in folders at the repository root and install under this one root:
``wai_dispatch.dispatch`` (the pure core), ``.setfacts`` (a set's facts and the decode's limits),
``.codec``, ``.paths``, ``.service``, ``.cli``, ``.conformance`` and ``.tools``.
"""

from __future__ import annotations

__version__ = "0.1.0"
