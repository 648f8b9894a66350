"""Each command's parser, declared with the standard library only (``add(sub)`` per module,
listed in ``cli/flags.py``'s ``COMMANDS``): ``--help`` loads these, never what runs a command.
Each parser names the function that runs it (``module:function`` of ``wai_dispatch.cli``)."""
