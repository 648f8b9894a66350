"""Tools: set writers, training of the bundled demo weights, CompressAI import, benchmarks. They need the tools extra."""
