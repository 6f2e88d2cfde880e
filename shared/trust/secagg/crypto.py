"""The protocol's cryptography, from the `cryptography` package (one small home).

  X25519 key agreement, HKDF-SHA256 to derive keys with a context label, AES-GCM to encrypt a
  share for one neighbour, and ChaCha20 as the pseudorandom generator that expands a 32-byte
  seed into a mask vector mod 2^bits. Secrets come from the OS CSPRNG, never from a numpy
  generator or a run's seed.
"""

from __future__ import annotations

import os

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_BYTES = 32
NONCE_BYTES = 12  # AES-GCM


class KeyPair:
    """An X25519 key pair; `public` is the 32 raw bytes a user advertises."""

    def __init__(self, private: X25519PrivateKey | None = None) -> None:
        self.private = private or X25519PrivateKey.generate()
        self.public = self.private.public_key().public_bytes_raw()

    @classmethod
    def from_secret(cls, secret: bytes) -> KeyPair:
        """The pair whose private key is the 32 raw bytes `secret` (a reconstructed key)."""
        return cls(X25519PrivateKey.from_private_bytes(secret))

    def secret(self) -> bytes:
        """The raw private key (what a user Shamir-shares so that its dropout can be undone)."""
        return self.private.private_bytes_raw()

    def agree(self, peer_public: bytes, context: bytes) -> bytes:
        """A 32-byte key shared with the owner of `peer_public`, bound to `context`."""
        shared = self.private.exchange(X25519PublicKey.from_public_bytes(peer_public))
        return derive(shared, context)


def derive(material: bytes, context: bytes) -> bytes:
    """HKDF-SHA256 of `material` to 32 bytes under the label `context`."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                info=context).derive(material)


def random_seed() -> bytes:
    """32 bytes from the OS CSPRNG (a self-mask seed)."""
    return os.urandom(KEY_BYTES)


def seal(key: bytes, plaintext: bytes, associated: bytes) -> bytes:
    """AES-GCM encryption of `plaintext` under `key`, authenticating `associated`: a fresh
    random nonce, then the ciphertext and its tag."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, associated)


def unseal(key: bytes, sealed: bytes, associated: bytes) -> bytes:
    """The plaintext `seal` encrypted (cryptography's InvalidTag if anything was altered)."""
    return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], associated)


def mask(seed: bytes, length: int, bits: int) -> np.ndarray:
    """`length` pseudorandom integers mod 2^bits (uint64), the ChaCha20 keystream of `seed`
    (one seed expands one mask: seeds are derived per cohort and per purpose)."""
    if not 1 <= bits <= 64:
        raise ValueError("masks live mod 2^bits with 1 <= bits <= 64")
    cipher = Cipher(algorithms.ChaCha20(seed, b"\0" * 16), mode=None).encryptor()
    words = np.frombuffer(cipher.update(b"\0" * (8 * length)), dtype="<u8").astype(np.uint64)
    return words & modulus_mask(bits)


def modulus_mask(bits: int) -> np.uint64:
    """2^bits - 1 as a uint64 (reduction mod 2^bits is a bitwise and)."""
    return np.uint64((1 << bits) - 1)
