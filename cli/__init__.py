"""The ``wai-dispatch`` command line (docs/cli.md): :mod:`.main` parses and runs a command,
loading only that command's parser (``cli/parsers/``, each with ``add(sub)``) and, once the
line has parsed, the module that runs it; one module per group of commands (``decode``,
``remote``, ``verify``, ``placement``, ``sets``, ``serve``, ``tools``, ``explain``, ``policy``,
``config``, ``doctor``, ``completion``)."""
