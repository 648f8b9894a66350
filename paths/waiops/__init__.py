"""The ``wai-ops/1`` integer operator set (docs/wai-ops.md): its program format
(:mod:`.program`), loading and bound-checking a program (:mod:`.load`, :mod:`.bounds`), the
int64 reference interpreter (:mod:`.reference`), the fast exact engines (:mod:`.engine`,
:mod:`.onnx_engine`) and the ``cpu/wai-ops/integer`` adapter (:mod:`.adapter`)."""
