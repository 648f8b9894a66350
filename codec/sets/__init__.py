"""Parameter sets (``wai-set/1``, docs/sets.md), one concept per module:

- :mod:`.errors`: the typed errors (``set_*`` codes);
- what a set states of itself (``facts``, a typed model) is :mod:`setfacts.facts`'s, below the
  codec, so that the paths read it without importing the codec;
- :mod:`.manifest`: ``set.json``, its digest, file names, the manifest writer;
- :mod:`.loaded`: a set opened for a decode, every byte verified once and kept;
- :mod:`.stage`: copying a folder or an archive safely into the store's staging area;
- :mod:`.store`: the local set store, ``SetStore`` (install, list, verify, remove, defaults);
- :mod:`.bundled`: installing the sets a build ships with.

The names most callers need are re-exported here.
"""

from wai_dispatch.codec.sets.bundled import (
    bundled_digest,
    bundled_folders,
    install_bundled,
)
from wai_dispatch.codec.sets.errors import (
    SetArchiveInvalid,
    SetCapabilityMismatch,
    SetError,
    SetFileMismatch,
    SetFileMissing,
    SetNotInstalled,
    SetTooLarge,
)
from wai_dispatch.codec.sets.loaded import LoadedSet, load
from wai_dispatch.codec.sets.manifest import (
    MANIFEST_NAME,
    Manifest,
    canonical_json,
    write_manifest,
)
from wai_dispatch.codec.sets.stage import SetLimits
from wai_dispatch.codec.sets.store import InstalledSet, Problem, SetStore

__all__ = [
    "MANIFEST_NAME",
    "InstalledSet",
    "LoadedSet",
    "Manifest",
    "Problem",
    "SetArchiveInvalid",
    "SetCapabilityMismatch",
    "SetError",
    "SetFileMismatch",
    "SetFileMissing",
    "SetLimits",
    "SetNotInstalled",
    "SetStore",
    "SetTooLarge",
    "bundled_digest",
    "bundled_folders",
    "canonical_json",
    "install_bundled",
    "load",
    "write_manifest",
]
