"""The typed errors of parameter sets and the store (all :class:`codec.errors.CodecError`)::

SetError                 set_invalid: base
├── ManifestInvalid      set_manifest_invalid: set.json is not a valid wai-set/1 manifest
├── SetFileMismatch      set_file_mismatch: a file's bytes are not the manifest's (named)
├── SetFileMissing       set_file_missing: a file the manifest lists is absent (named)
├── SetFileUnexpected    set_file_unexpected: a file the manifest does not list (named)
├── SetUnsafeEntry       set_unsafe_entry: traversal, absolute name, link, device file
├── SetTooLarge          set_too_large: a file, the set or an archive over its limit
├── SetArchiveInvalid    set_archive_invalid: a source that is no readable directory/archive
├── SetDigestInvalid     set_digest_invalid: not a digest (or digest prefix)
├── SetNotInstalled      set_not_installed: no such set in the store
├── SetAmbiguous         set_ambiguous: several sets fit and none is the default
├── SetCapabilityMismatch set_capability_mismatch: a set of another capability
├── SetNoTables          set_no_tables: the set names no entropy tables file
└── PinMismatch          pin_mismatch: the set is not the one the pin names (§2)
"""

from __future__ import annotations

from wai_dispatch.codec.errors import CodecError


class SetError(CodecError):
    code = "set_invalid"


class ManifestInvalid(SetError):
    code = "set_manifest_invalid"


class SetFileMismatch(SetError):
    code = "set_file_mismatch"


class SetFileMissing(SetError):
    code = "set_file_missing"


class SetFileUnexpected(SetError):
    code = "set_file_unexpected"


class SetUnsafeEntry(SetError):
    code = "set_unsafe_entry"


class SetTooLarge(SetError):
    code = "set_too_large"


class SetArchiveInvalid(SetError):
    code = "set_archive_invalid"


class SetDigestInvalid(SetError):
    code = "set_digest_invalid"


class SetNotInstalled(SetError, LookupError):
    code = "set_not_installed"


class SetAmbiguous(SetError, LookupError):
    code = "set_ambiguous"


class SetCapabilityMismatch(SetError):
    code = "set_capability_mismatch"


class SetNoTables(SetError):
    code = "set_no_tables"


class PinMismatch(SetError):
    code = "pin_mismatch"


def one_line(exc: object) -> str:
    """An exception's text on one line, at most 200 characters (for messages and problems)."""
    return " ".join(str(exc).split())[:200]
