"""The tools' errors (tools/): the set writers and the encoder (docs/encode.md). Each names its
stable ``code`` and, as its docstring, the code's meaning; none reaches the HTTP service."""

from __future__ import annotations

from wai_dispatch.codec.errors import CodecError


class SetWriterRefused(CodecError):
    """make-set refused the set: a checkpoint that does not read or is not the model, a check
    that does not hold; the output folder is left as it was"""

    code = "set_writer_refused"


class EncodeUnsupported(CodecError):
    """a set whose capability has no encoder in this build"""

    code = "encode_unsupported"


class CheckpointMismatch(CodecError):
    """a checkpoint whose BLAKE3 is not the one the set's usage statement records (the set's
    synthesis was not written from it)"""

    code = "encode_checkpoint_mismatch"


class CheckpointRequired(CodecError):
    """encode without --checkpoint for a set whose checkpoint is not at hand (not the bundled
    demo weights), or a checkpoint that does not read as the set's model"""

    code = "encode_checkpoint_required"


class SymbolsOutOfRange(CodecError):
    """a quantized latent with a symbol outside the range the set's integer program declares
    (its decode would refuse it); the range is named"""

    code = "encode_symbols_out_of_range"
