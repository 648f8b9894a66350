"""Tools: set writers, training of the demo weights, CompressAI import, benchmarks, the page's
browser check. Each is a script (``python -m wai_dispatch.tools.NAME``); most need the tools
extra (``make tools``). Beside the CLI in the layers: no tool imports an HTTP module."""
