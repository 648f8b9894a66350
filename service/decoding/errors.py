"""The decoding library's errors of a decode's cost and a set's payload info (the decode's own,
``decode_no_path``, is :mod:`.results`'), and a setting that does not validate (the settings
are :mod:`service.settings`'). Each names its stable ``code`` and, as its docstring, the code's
meaning."""

from __future__ import annotations

from collections.abc import Iterable

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch.errors import InvalidInput, TooLarge


class LatentOverLimit(TooLarge):
    """a payload header whose latent (C×H×W) is over max_latent_elements"""

    code = "latent_over_limit"


class MemoryOverBudget(TooLarge):
    """a decode whose memory estimate (from its payload header) is over memory_budget_bytes"""

    code = "decode_memory_over_budget"


class TimeOverLimit(TooLarge):
    """a decode whose time estimate (from its payload header) is over decode_timeout_s"""

    code = "decode_time_over_limit"


class SetPayloadInfoInvalid(CodecError):
    """a set whose payload_info file (default payload.json) is missing, not JSON, or states no
    symbols_digest"""

    code = "set_payload_info_invalid"


class SettingsInvalid(InvalidInput):
    """a setting (environment, WAI_CONFIG file or flag) that does not validate"""

    code = "settings_invalid"

    def __init__(self, problems: str | Iterable[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))
