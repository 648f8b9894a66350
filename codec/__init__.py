"""The data a decode reads (§2, §6.3), one concept per module: envelopes (:mod:`.envelope`,
:mod:`.envelope_read`), payloads and their headers (:mod:`.payload`), the entropy stage
(:mod:`.entropy`, :mod:`.tables`, :mod:`.compressai_rans`), parameter sets and pins
(:mod:`.sets`), the picture (:mod:`.picture`), safe file reads and writes (:mod:`.files`), the
data directory's layout (:mod:`.config`) and the typed errors (:mod:`.errors`).

Used through its modules (``from wai_dispatch.codec.envelope import Envelope``): importing one
loads only what it needs. Imports ``dispatch`` and nothing above it."""

__all__: list[str] = []
