"""The typed errors of parameter sets and the store (all :class:`codec.errors.CodecError`)::

SetError                 set_invalid: base
├── ManifestInvalid      set_manifest_invalid: set.json is not a valid wai-set/1 manifest
├── SetFileMismatch      set_file_mismatch: a file's bytes are not the manifest's (named)
│   └── SetDamaged       set_damaged: an installed set opened for a decode is (a server fault)
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

from wai_dispatch.codec.codes import CodecCode
from wai_dispatch.codec.errors import CodecError


class SetError(CodecError):
    code: str = CodecCode.SET_INVALID


class ManifestInvalid(SetError):
    code = CodecCode.SET_MANIFEST_INVALID


class SetFileMismatch(SetError):
    code = CodecCode.SET_FILE_MISMATCH


class SetDamaged(SetFileMismatch):
    """An installed set whose folder no longer matches its manifest (a file changed or gone)
    when it is opened: the store's fault, not the request's (503)."""

    code = CodecCode.SET_DAMAGED


class SetFileMissing(SetError):
    code = CodecCode.SET_FILE_MISSING


class SetFileUnexpected(SetError):
    code = CodecCode.SET_FILE_UNEXPECTED


class SetUnsafeEntry(SetError):
    code = CodecCode.SET_UNSAFE_ENTRY


class SetTooLarge(SetError):
    code = CodecCode.SET_TOO_LARGE


class SetArchiveInvalid(SetError):
    code = CodecCode.SET_ARCHIVE_INVALID


class SetDigestInvalid(SetError):
    code = CodecCode.SET_DIGEST_INVALID


class SetNotInstalled(SetError, LookupError):
    code = CodecCode.SET_NOT_INSTALLED


class SetAmbiguous(SetError, LookupError):
    code = CodecCode.SET_AMBIGUOUS


class SetCapabilityMismatch(SetError):
    code = CodecCode.SET_CAPABILITY_MISMATCH


class SetNoTables(SetError):
    code = CodecCode.SET_NO_TABLES


class PinMismatch(SetError):
    code = CodecCode.PIN_MISMATCH


def one_line(exc: object) -> str:
    """An exception's text on one line, at most 200 characters (for messages and problems)."""
    return " ".join(str(exc).split())[:200]
