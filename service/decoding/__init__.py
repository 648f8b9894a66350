"""The decoding library every caller shares — the CLI, the tools and the HTTP service:
:class:`.decoder.Decoder` (opens the set store once, decodes, plans, verifies, imports), its
results (:mod:`.results`), the placement plan (:mod:`.plan`), §6.4 agreement (:mod:`.verify`),
the CompressAI import (:mod:`.compressai`) and the one :class:`.settings.Settings`.

It imports no web framework and no database (tests/project/test_architecture.py). Used through its
modules, so that reading the settings (every command does) does not load the decoder."""

__all__: list[str] = []
