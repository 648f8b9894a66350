"""The data a decode reads (§2, §6.3), one concept per module: envelopes (:mod:`.envelope`),
payloads and their headers (:mod:`.payload`), the entropy stage (:mod:`.entropy`,
:mod:`.tables`, :mod:`.compressai_rans`), parameter sets and pins (:mod:`.sets`), the picture
(:mod:`.picture`), safe file reads and writes (:mod:`.files`), the data directory's layout
(:mod:`.layout`) and the typed errors (:mod:`.errors`)."""
