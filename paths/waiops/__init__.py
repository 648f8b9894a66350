"""The ``wai-ops/1`` integer operator set (docs/wai-ops.md): its program format, the bound rule,
the int64 reference interpreter, the fast exact engine and the ``cpu/wai-ops/integer`` adapter."""
