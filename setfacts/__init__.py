"""What a path adapter reads about a set and its decode, below both the codec and the paths:

- :mod:`.facts`: what a set states of itself (``facts``: its files, latent, one entry per
  backend's program), a typed model parsed once when the manifest is read;
- :mod:`.limits`: the decode's limits, what a header may ask a decode to allocate.

The codec reads and writes sets with these types; the paths read them, and import no codec.
"""
