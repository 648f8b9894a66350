"""Tools: set writers, training of the demo weights, CompressAI import, benchmarks.
They need the tools extra (`make tools`)."""
