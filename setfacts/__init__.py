"""What a path adapter reads about a set and its decode, below both the codec and the paths:
what a set states of itself (:mod:`.facts`, parsed once when the manifest is read) and the
decode's limits (:mod:`.limits`). The codec reads and writes sets with these types; the paths
read them, and import no codec."""
