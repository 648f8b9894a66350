"""The data a decode reads (§2, §6.3), one concept per module: envelopes (:mod:`.envelope`),
payloads, their headers and the entropy stage over them (:mod:`.payload`), its tables
(:mod:`.tables`, :mod:`.compressai_rans`), parameter sets and pins (:mod:`.sets`), safe file
reads and writes (:mod:`.files`), the data directory's layout (:mod:`.layout`) and the typed
errors (:mod:`.errors`)."""
