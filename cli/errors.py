"""The command line's own errors (cli/): its arguments, `serve --ray`, the tools extra, the report
store a command needs, a refused operation of the system. Each names its stable ``code`` and, as
its docstring, the code's meaning; none reaches the HTTP service. The errors of a ``--url``
call are :mod:`cli.remote`'s (the sink's client loads no error tree). What each kind exits
with is :func:`cli.run.exit_status`'s."""

from __future__ import annotations

from wai_dispatch.dispatch.errors import InvalidArgument, InvalidInput, Unavailable


class UsageError(InvalidArgument):
    """A command-line argument this command refuses (``invalid_argument``)."""


class ToolsMissing(InvalidInput):
    """a command that needs the tools extra, without it"""

    code = "tools_missing"


class RayMissing(InvalidInput):
    """`serve --ray` without the ray extra (pip install 'wai-dispatch[ray]')"""

    code = "ray_missing"


class RayUnreachable(Unavailable):
    """no Ray cluster answers at the address `serve --ray` names, or it refused the deployment"""

    code = "ray_unreachable"


class StoreUnavailable(Unavailable):
    """a command that needs the report store while it does not answer or cannot write (a
    database that is down, a full disk under it); one line, never a traceback"""

    code = "store_down"


class IoFailed(InvalidInput):
    """the system refused an operation no other code names (e.g. a full disk under the data
    directory); one line, never a traceback"""

    code = "io_failed"
