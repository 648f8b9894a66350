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

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch.errors import Conflict, NotFound, TooLarge, Unavailable


class SetError(CodecError):
    """a parameter set with no more specific code"""

    code = "set_invalid"


class ManifestInvalid(SetError):
    """a set.json that does not validate"""

    code = "set_manifest_invalid"


class SetFileMismatch(SetError):
    """a set file whose bytes differ from the manifest (names the file)"""

    code = "set_file_mismatch"


class SetDamaged(Unavailable, SetFileMismatch):
    """an installed set whose files no longer match its manifest: a fault of the server's store,
    not of the request (names the file)"""

    code = "set_damaged"


class SetFileMissing(NotFound, SetError):
    """a file the manifest lists is missing (names the file)"""

    code = "set_file_missing"


class SetFileUnexpected(SetError):
    """a file the manifest does not list (names the file)"""

    code = "set_file_unexpected"


class SetUnsafeEntry(SetError):
    """an install refused: path traversal, a link, a device or another non-regular file"""

    code = "set_unsafe_entry"


class SetTooLarge(TooLarge, SetError):
    """an install over the store's size limits"""

    code = "set_too_large"


class SetArchiveInvalid(SetError):
    """an archive that does not read"""

    code = "set_archive_invalid"


class SetDigestInvalid(SetError):
    """a set digest that is not 64 hex digits"""

    code = "set_digest_invalid"


class SetNotInstalled(NotFound, SetError):
    """a set digest that is not in the store"""

    code = "set_not_installed"


class SetAmbiguous(Conflict, SetError, LookupError):
    """a default set that is not unique"""

    code = "set_ambiguous"


class SetCapabilityMismatch(SetError):
    """a set of another capability than the one the decode or command names"""

    code = "set_capability_mismatch"


class SetNoTables(SetError):
    """a set whose manifest names no entropy tables file"""

    code = "set_no_tables"


class PinMismatch(SetError):
    """the set's digest is not the pin's"""

    code = "pin_mismatch"


def one_line(exc: object) -> str:
    """An exception's text on one line, at most 200 characters (for messages and problems)."""
    return " ".join(str(exc).split())[:200]
