"""The parameters of the candidate search (:mod:`memcli.consolidate.candidates`: MinHash
signatures and LSH banding), in a module of their own: what only names them, such as the key of
a pair cache, then does not import numpy (a store of small blocks never needs it)."""

# Banding: a pair becomes a candidate when all DEFAULT_ROWS rows of one of DEFAULT_BANDS bands
# agree (see :mod:`memcli.consolidate.candidates` for the recall this gives).
DEFAULT_BANDS = 48
DEFAULT_ROWS = 4
DEFAULT_NUM_PERM = DEFAULT_BANDS * DEFAULT_ROWS
# Character n-gram length of the shingles.
SHINGLE_CHARS = 5
# What a signature is (one-permutation hashing of the 5-grams within tokens, see candidates._bin_minima):
# part of the pair cache's parameters, so that a change of the signature invalidates it. The
# signature cache (memcli.store.index, `_minhash.bin`) has its own version in its header,
# bumped with this: signatures of two kinds mixed in one run would lose pairs silently.
SIGNATURE_KIND = "oph5tok"
