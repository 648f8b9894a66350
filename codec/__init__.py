"""The data a decode reads: envelopes, parameter sets and pins, payloads and the
entropy stage (§2, §6.3)."""
