"""The service's use cases, below HTTP: what a request asks of the decoding library and the
report store, as one typed operation each (``decode.py``: an envelope's bytes in, a typed
outcome out, its reports recorded). The HTTP routes, the CLI and the Ray replicas call them;
they import no web framework."""
