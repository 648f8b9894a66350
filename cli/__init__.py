"""The ``wai-dispatch`` command line: :mod:`.main` parses and runs a command, loading only that
command's module; one module per group of commands (``decode``, ``verify``, ``paths``,
``sets``, ``serve``, ``tools``, ``explain``, ``policy``), each with ``add(sub)``.

It imports no HTTP module: ``serve`` hands uvicorn the service's import string."""

__all__: list[str] = []
