"""The ``wai-dispatch`` command line."""
