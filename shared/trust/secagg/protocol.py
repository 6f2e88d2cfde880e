"""Secure aggregation of integer vectors (Bonawitz et al. 2017; the sparse SecAgg+ graph of
Bell et al. 2020), as pure message-passing steps.

A cohort's users each hold a vector x_u of integers (its statistics on the grid plus its share
of the noise). The server learns sum_u x_u mod 2^bits over the users whose masked inputs
arrived, and nothing else about any x_u, while at most a bounded number of users drop out:

  round 0  advertise     each user sends two X25519 public keys (share encryption, masks)
  round 1  share keys    each user Shamir-shares its self-mask seed b_u and its mask key's
                         private half among its neighbours, one AES-GCM ciphertext each,
                         routed by the server
  round 2  masked input  y_u = x_u + PRG(b_u) + sum_v +-PRG(s_uv) mod 2^bits, s_uv agreed
                         with each neighbour v that shared (the signs cancel in the sum)
  round 3  unmask        the server names the survivors (inputs in); each user returns, for
                         each neighbour, its share of b_u if u survived, else of u's mask key;
                         the server removes the self masks and the dropped users' pair masks

`UserSession` is one user's side, `CohortAggregator` the server's state machine; neither does
I/O, so a server wires them to routes and a test or an in-process run to each other
(`run_cohort`). Dropouts are inputs, not exceptions: a cohort aborts (`CohortAborted`, nothing
released) only when fewer than `min_survivors` inputs arrived or a secret cannot be rebuilt.
An honest user refuses to unmask when the server names fewer survivors than that, so a server
that drops honest users to isolate one learns nothing from it.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from privrl.trust.secagg import crypto, shamir


class CohortAborted(RuntimeError):
    """The cohort cannot complete: nothing about its users is released."""


class MalformedInput(ValueError):
    """One user's message is refused (that user counts as dropped; the cohort goes on)."""


@dataclass(frozen=True)
class CohortSetup:
    """A cohort's public parameters (the same for its server and every user in it)."""

    cohort: bytes  # a public label unique to the cohort: binds every key and ciphertext
    size: int  # users the schedule puts in it
    min_survivors: int  # inputs needed for a release (the noise's calibration assumes them)
    length: int  # integers in one vector
    bits: int = 32  # vectors live mod 2^bits
    degree: int = 16  # neighbours per user (SecAgg+; >= size - 1 is the complete graph)

    def __post_init__(self) -> None:
        if not 1 <= self.min_survivors <= self.size:
            raise ValueError("min_survivors must lie in 1 .. size")
        if self.degree < 2 or self.length < 1:
            raise ValueError("a cohort needs degree >= 2 and vectors of length >= 1")

    def context(self, purpose: bytes) -> bytes:
        """The HKDF label of a key derived for `purpose` in this cohort."""
        return b"privrl secagg|" + self.cohort + b"|" + purpose

    def neighbours(self, index: int, roster: Iterable[int]) -> tuple[int, ...]:
        """User `index`'s neighbours among the users of `roster` (those that advertised): the
        ceil(degree / 2) nearest on each side of a circle of them (a Harary graph; all of them
        when the roster is small). The circle is the users in the order of a public hash of
        the cohort's label and their index, so users with neighbouring indices (claimed
        together, often by one process that may die as one) are scattered over it: a block of
        dropouts takes few of any one user's neighbours."""
        ring, pos = _circle(self.cohort, tuple(sorted(roster)))
        at = pos[index]
        half = min((self.degree + 1) // 2, len(ring) // 2)
        out = {ring[(at + j) % len(ring)] for j in range(-half, half + 1)} - {index}
        return tuple(sorted(out))

    def threshold(self, neighbours: int) -> int:
        """Shares that rebuild a secret spread over `neighbours` neighbours: a majority."""
        return neighbours // 2 + 1


@functools.lru_cache(maxsize=16)
def _circle(cohort: bytes, roster: tuple[int, ...]) -> tuple[tuple[int, ...], dict[int, int]]:
    """The users of `roster` in the order of SHA-256(cohort label, index), and each one's
    position in it (cached: every user and the server ask for the same roster many times)."""
    ring = tuple(sorted(roster, key=lambda i: hashlib.sha256(
        cohort + b"|circle|" + i.to_bytes(4, "big")).digest()))
    return ring, {u: k for k, u in enumerate(ring)}


@dataclass(frozen=True)
class Advertisement:
    """Round 0: a user's two public keys."""

    index: int
    cipher_key: bytes
    mask_key: bytes


def _pair_label(sender: int, recipient: int) -> bytes:
    return struct.pack(">II", sender, recipient)


def _pair_sign(owner: int, other: int) -> int:
    """+1 when `owner` adds the pair mask, -1 when it subtracts it (the lower index adds)."""
    return 1 if owner < other else -1


def _to_ring(values: np.ndarray, bits: int) -> np.ndarray:
    """Signed integers as residues mod 2^bits (uint64)."""
    return np.asarray(values, dtype=np.int64).astype(np.uint64) & crypto.modulus_mask(bits)


def to_signed(residues: np.ndarray, bits: int) -> np.ndarray:
    """Residues mod 2^bits as the signed integers in [-2^(bits-1), 2^(bits-1))."""
    r = np.asarray(residues, dtype=np.uint64) & crypto.modulus_mask(bits)
    signed = r.astype(np.int64)
    if bits == 64:
        return signed
    return np.where(signed >= 1 << (bits - 1), signed - (1 << bits), signed)


@dataclass
class UserSession:
    """One user's side of one cohort. Its secrets (key pairs, self-mask seed) come from the OS
    CSPRNG; its vector never leaves except masked."""

    setup: CohortSetup
    index: int
    vector: np.ndarray  # the user's integers (statistics on the grid plus its noise share)
    _cipher: crypto.KeyPair = field(default_factory=crypto.KeyPair, repr=False)
    _masks: crypto.KeyPair = field(default_factory=crypto.KeyPair, repr=False)
    _seed: bytes = field(default_factory=crypto.random_seed, repr=False)
    _roster: dict[int, Advertisement] = field(default_factory=dict, repr=False)
    _inbox: dict[int, bytes] = field(default_factory=dict, repr=False)
    _share_keys: dict[int, bytes] = field(default_factory=dict, repr=False)  # per neighbour
    _answered: bool = False

    def advertise(self) -> Advertisement:
        """Round 0: the public keys."""
        return Advertisement(self.index, self._cipher.public, self._masks.public)

    def share_keys(self, roster: Mapping[int, Advertisement]) -> dict[int, bytes]:
        """Round 1: given every advertisement, an encrypted share pair for each neighbour."""
        if self.index not in roster or len(roster) < self.setup.min_survivors:
            raise CohortAborted("too few users advertised keys: this user goes no further")
        self._roster = dict(roster)
        nbrs = self.setup.neighbours(self.index, roster)
        xs = [v + 1 for v in nbrs]
        t = self.setup.threshold(len(nbrs))
        seed_shares = shamir.split(int.from_bytes(self._seed, "big"), xs, t)
        key_shares = shamir.split(int.from_bytes(self._masks.secret(), "big"), xs, t)
        out = {}
        for v, (_, b), (_, s) in zip(nbrs, seed_shares, key_shares, strict=True):
            key = self._share_keys[v] = self._cipher.agree(roster[v].cipher_key,
                                                           self.setup.context(b"share"))
            label = _pair_label(self.index, v)
            out[v] = crypto.seal(key, label + shamir.to_bytes(b) + shamir.to_bytes(s),
                                 self.setup.cohort + label)
        return out

    def masked_input(self, inbox: Mapping[int, bytes]) -> np.ndarray:
        """Round 2: given the ciphertexts its neighbours sent it, the masked vector (uint64
        residues mod 2^bits): pair masks with exactly those neighbours."""
        nbrs = set(self.setup.neighbours(self.index, self._roster))
        if not set(inbox) <= nbrs:
            raise MalformedInput("shares from users that are not this user's neighbours")
        self._inbox = dict(inbox)
        bits, n = self.setup.bits, self.setup.length
        vec = np.asarray(self.vector, dtype=np.int64).reshape(-1)
        if vec.shape != (n,):
            raise ValueError(f"the cohort sums vectors of {n} integers, not {vec.shape}")
        y = _to_ring(vec, bits) + crypto.mask(self._self_seed(), n, bits)
        for v in sorted(inbox):
            pair = crypto.mask(self._masks.agree(self._roster[v].mask_key,
                                                 self.setup.context(b"pair")), n, bits)
            y = y + pair if _pair_sign(self.index, v) > 0 else y - pair
        return y & crypto.modulus_mask(bits)

    def _self_seed(self) -> bytes:
        return crypto.derive(self._seed, self.setup.context(b"self"))

    def unmask(self, survivors: Iterable[int]) -> dict[int, bytes]:
        """Round 3: for each neighbour that shared, its seed share if it survived, else its
        mask-key share; never both, only once, and never for fewer survivors than the cohort
        needs (a server that dropped honest users to isolate one gets nothing)."""
        alive = set(survivors)
        if self._answered:
            raise MalformedInput("this user has answered its unmasking request already")
        if len(alive) < self.setup.min_survivors or self.index not in alive:
            raise CohortAborted(f"{len(alive)} survivors named; the cohort needs"
                                f" {self.setup.min_survivors}: this user reveals nothing")
        self._answered = True
        out = {}
        for u, sealed in self._inbox.items():
            key = self._share_keys[u]  # agreed in round 1 (the graph is symmetric)
            label = _pair_label(u, self.index)
            plain = crypto.unseal(key, sealed, self.setup.cohort + label)
            if plain[:8] != label:
                raise MalformedInput("a share addressed to another pair")
            b, s = plain[8:8 + shamir.SHARE_BYTES], plain[8 + shamir.SHARE_BYTES:]
            out[u] = b if u in alive else s
        return out


class CohortAggregator:
    """The server's side of one cohort: collects each round's messages, decides the
    survivors, rebuilds the masks it must remove and returns the sum, or aborts."""

    def __init__(self, setup: CohortSetup) -> None:
        self.setup = setup
        self.adverts: dict[int, Advertisement] = {}
        self.shares: dict[int, dict[int, bytes]] = {}  # sender -> recipient -> ciphertext
        self.inputs: dict[int, np.ndarray] = {}
        self.reveals: dict[int, dict[int, bytes]] = {}  # revealer -> owner -> share
        self._inboxes: dict[int, dict[int, bytes]] = {}  # recipient -> sender -> ciphertext
        self.round = 0
        self.survivors: frozenset[int] = frozenset()

    def _in_round(self, r: int) -> None:
        if self.round != r:
            raise MalformedInput(f"the cohort is in round {self.round}, not {r}")

    def advertise(self, ad: Advertisement) -> None:
        """Round 0: one user's keys (an index outside the cohort or seen twice is refused)."""
        self._in_round(0)
        if not 0 <= ad.index < self.setup.size or ad.index in self.adverts:
            raise MalformedInput(f"user index {ad.index} is outside the cohort or repeated")
        if len(ad.cipher_key) != crypto.KEY_BYTES or len(ad.mask_key) != crypto.KEY_BYTES:
            raise MalformedInput("public keys are 32 raw bytes")
        self.adverts[ad.index] = ad

    def roster(self) -> dict[int, Advertisement]:
        """Closes round 0: every advertisement, sent to each user."""
        if self.round == 0:
            self._need(len(self.adverts), "advertised keys")
            self.round = 1
        return dict(self.adverts)

    def share(self, sender: int, sealed: Mapping[int, bytes]) -> None:
        """Round 1: one user's ciphertexts, one per neighbour."""
        self._in_round(1)
        if sender not in self.adverts or sender in self.shares:
            raise MalformedInput(f"user {sender} did not advertise or has shared already")
        if set(sealed) != set(self.setup.neighbours(sender, self.adverts)):
            raise MalformedInput(f"user {sender} must share with exactly its neighbours")
        self.shares[sender] = dict(sealed)

    def inbox(self, recipient: int) -> dict[int, bytes]:
        """Closes round 1: the ciphertexts addressed to `recipient`."""
        if self.round == 1:
            self._need(len(self.shares), "shared their keys")
            self.round = 2
            for u, sealed in self.shares.items():  # by recipient: O(degree) per inbox
                for v, message in sealed.items():
                    self._inboxes.setdefault(v, {})[u] = message
        return dict(self._inboxes.get(recipient, {}))

    def submit(self, sender: int, masked: np.ndarray) -> None:
        """Round 2: one masked vector; a malformed one is refused alone (MalformedInput: the
        sender counts as dropped)."""
        self._in_round(2)
        if sender not in self.shares or sender in self.inputs:
            raise MalformedInput(f"user {sender} did not share keys or has submitted already")
        arr = np.asarray(masked)
        if (arr.shape != (self.setup.length,) or arr.dtype.kind not in "ui"
                or (arr.dtype.kind == "i" and arr.min(initial=0) < 0)
                or arr.max(initial=0) > int(crypto.modulus_mask(self.setup.bits))):
            raise MalformedInput(f"a masked input is {self.setup.length} integers in"
                                 f" [0, 2^{self.setup.bits})")
        self.inputs[sender] = arr.astype(np.uint64)

    def unmask_request(self) -> frozenset[int]:
        """Closes round 2: the survivors (inputs in), sent to each; too few aborts."""
        if self.round == 2:
            self._need(len(self.inputs), "sent masked inputs")
            self.survivors = frozenset(self.inputs)
            self.round = 3
        return self.survivors

    def reveal(self, sender: int, shares: Mapping[int, bytes]) -> None:
        """Round 3: one survivor's shares of its neighbours' secrets."""
        self._in_round(3)
        if sender not in self.survivors or sender in self.reveals:
            raise MalformedInput(f"user {sender} is no survivor or has revealed already")
        if any(len(s) != shamir.SHARE_BYTES for s in shares.values()):
            raise MalformedInput("a share is one field element")
        self.reveals[sender] = dict(shares)

    def result(self) -> np.ndarray:
        """The survivors' sum as signed integers; CohortAborted when a secret it needs has too
        few shares (nothing is released)."""
        self._in_round(3)
        setup, bits, n = self.setup, self.setup.bits, self.setup.length
        total = np.zeros(n, dtype=np.uint64)
        for y in self.inputs.values():
            total += y
        dropped = set(self.shares) - self.survivors
        for u in sorted(self.survivors):
            seed = self._rebuild(u).to_bytes(crypto.KEY_BYTES, "big")
            total -= crypto.mask(crypto.derive(seed, setup.context(b"self")), n, bits)
        for u in sorted(dropped):
            keys = crypto.KeyPair.from_secret(self._rebuild(u).to_bytes(crypto.KEY_BYTES, "big"))
            for v in setup.neighbours(u, self.adverts):
                if v in self.survivors and u in self.shares.get(v, {}):
                    pair = crypto.mask(keys.agree(self.adverts[v].mask_key,
                                                  setup.context(b"pair")), n, bits)
                    # v added sign(v, u) * pair: take it away
                    total = total - pair if _pair_sign(v, u) > 0 else total + pair
        self.round = 4
        return to_signed(total, bits)

    def _rebuild(self, owner: int) -> int:
        """`owner`'s secret from its neighbours' revealed shares (a majority needed)."""
        nbrs = self.setup.neighbours(owner, self.adverts)
        got = [(v + 1, shamir.from_bytes(r[owner])) for v, r in self.reveals.items()
               if owner in r]
        need = self.setup.threshold(len(nbrs))
        if len(got) < need:
            raise CohortAborted(f"user {owner}'s secret has {len(got)} of {need} shares:"
                                " the cohort aborts, nothing is released")
        return shamir.combine(got[:need])

    def _need(self, count: int, what: str) -> None:
        if count < self.setup.min_survivors:
            self.round = -1
            raise CohortAborted(f"only {count} users {what}; the cohort needs"
                                f" {self.setup.min_survivors}: nothing is released")


@dataclass
class CohortTrace:
    """What `run_cohort` saw on the wire (for tests and audits): each masked input."""

    masked: dict[int, np.ndarray] = field(default_factory=dict)


def run_cohort(setup: CohortSetup, vectors: Mapping[int, np.ndarray],
               drop_after_keys: Iterable[int] = (), drop_after_input: Iterable[int] = (),
               trace: CohortTrace | None = None) -> np.ndarray:
    """Every round of one cohort in process: users `vectors` (index -> integers), those in
    `drop_after_keys` vanishing after sharing their keys, those in `drop_after_input` after
    sending their masked input. The survivors' sum, or CohortAborted."""
    users = {i: UserSession(setup, i, np.asarray(v)) for i, v in vectors.items()}
    server = CohortAggregator(setup)
    for user in users.values():
        server.advertise(user.advertise())
    roster = server.roster()
    for i, user in users.items():
        server.share(i, user.share_keys(roster))
    gone = set(drop_after_keys)
    for i, user in users.items():
        inbox = server.inbox(i)
        if i not in gone:
            masked = user.masked_input(inbox)
            if trace is not None:
                trace.masked[i] = masked
            server.submit(i, masked)
    survivors = server.unmask_request()
    gone |= set(drop_after_input)
    for i in sorted(survivors - gone):
        server.reveal(i, users[i].unmask(survivors))
    return server.result()


def ideal_sum(setup: CohortSetup, vectors: Mapping[int, np.ndarray]) -> np.ndarray:
    """What `run_cohort` returns when nobody drops, without running a round: the inputs' sum
    mod 2^bits as signed integers (the ideal functionality the rounds realize). In process
    only, for learning figures at scale: nothing is masked, so it protects no one; the rounds'
    tests check that they compute exactly this."""
    total = np.zeros(setup.length, dtype=np.uint64)
    for vector in vectors.values():
        vec = np.asarray(vector, dtype=np.int64).reshape(-1)
        if vec.shape != (setup.length,):
            raise ValueError(f"the cohort sums vectors of {setup.length} integers, not"
                             f" {vec.shape}")
        total += _to_ring(vec, setup.bits)
    return to_signed(total, setup.bits)

