"""Sealing the test for the harness, so that only the harness process can read it.

Both sides use this module: the host imports it, the harness kernel runs its source. Why:
everything the host sends a sandbox passes through the agent's memory, and every process the
agent forks later inherits a copy of that memory, freed buffers included, which user code can
read in its own address space (``ctypes.string_at``). A test sent in the clear would reach the
solution that way, from this scoring or an earlier one on the same sandbox. So the harness
first offers a Diffie-Hellman public value (RFC 3526's 2048-bit MODP group, generator 2) and
keeps its secret exponent in its own memory; the host seals the test with a SHA-256 keystream
under the shared key. The agent, and so every later fork, only ever holds public values and
ciphertext.

Sandbox code, standard library only (Python 3.8+).
"""

import hashlib
import os

PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
GENERATOR = 2


class KeyExchange:
    """One side's secret exponent (256 random bits) and public value."""

    def __init__(self):
        self._secret = int.from_bytes(os.urandom(32), "big")
        self.public = pow(GENERATOR, self._secret, PRIME)

    def key(self, public):
        if not 1 < public < PRIME - 1:
            raise ValueError("not a public value of the group")
        return hashlib.sha256(pow(public, self._secret, PRIME).to_bytes(256, "big")).digest()

    def open(self, public, sealed):
        """What the holder of ``public``'s secret sealed for this side."""
        return _stream(self.key(public), sealed)


def seal(data, public, mine):
    """``(mine.public, data sealed by mine for the holder of public's secret)``. The key is
    fresh as long as ``public`` is, so the host may keep one ``mine`` for all its seals."""
    return mine.public, _stream(mine.key(public), data)


def _stream(key, data):
    """``data`` XOR SHA-256(key || block number), block after block (encrypts and decrypts)."""
    pad = b"".join(hashlib.sha256(key + n.to_bytes(8, "big")).digest() for n in range(len(data) // 32 + 1))
    mixed = int.from_bytes(data, "big") ^ int.from_bytes(pad[: len(data)], "big")
    return mixed.to_bytes(len(data), "big")
