"""The decoding library every caller shares — the CLI, the tools and the HTTP service:
:class:`.decoder.Decoder` (opens the set store once, decodes, plans, verifies, imports), its
results (:mod:`.results`), the placement plan (:mod:`.plan`), §6.4 agreement (:mod:`.verify`),
the CompressAI import (:mod:`.compressai`). It reads no environment (service/settings.py does,
at the edge)."""
