"""The conformance corpus: dispatch vectors (``dispatch/``), bundled sets and sample envelopes."""
