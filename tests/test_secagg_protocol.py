"""Secure aggregation's primitives and rounds (privrl.trust.secagg): Shamir against known
vectors, the cryptography, masks that cancel, dropouts, aborts, refused inputs, and masked
vectors that look uniform mod 2^bits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cryptography.exceptions import InvalidTag
from privrl.trust.secagg import crypto, shamir, wire
from privrl.trust.secagg.protocol import (
    CohortAborted,
    CohortAggregator,
    CohortSetup,
    CohortTrace,
    MalformedInput,
    UserSession,
    ideal_sum,
    run_cohort,
    to_signed,
)


def test_shamir_known_vector() -> None:
    """The textbook example (secret 1234, f = 1234 + 166x + 94x^2 over GF(1613)): the published
    shares, and any three of them give the secret back."""
    shares = shamir.split(1234, [1, 2, 3, 4, 5, 6], 3, prime=1613, coefficients=[166, 94])
    assert shares == [(1, 1494), (2, 329), (3, 965), (4, 176), (5, 1188), (6, 775)]
    for picked in ([0, 1, 2], [1, 3, 5], [5, 2, 0]):
        assert shamir.combine([shares[i] for i in picked], prime=1613) == 1234
    assert shamir.combine(shares[:2], prime=1613) != 1234  # below the threshold: not the secret


def test_shamir_large_field_round_trip() -> None:
    """A 32-byte secret in GF(2^521 - 1): a majority rebuilds it, bytes round-trip."""
    secret = int.from_bytes(crypto.random_seed(), "big")
    shares = shamir.split(secret, list(range(1, 11)), 6)
    assert shamir.combine(shares[4:]) == secret
    assert shamir.combine(shares[:5]) != secret
    assert shamir.from_bytes(shamir.to_bytes(shares[0][1])) == shares[0][1]
    with pytest.raises(ValueError):
        shamir.split(secret, [1, 1, 2], 2)


def test_crypto_agreement_sealing_and_masks() -> None:
    """X25519 agrees both ways and per context; AES-GCM refuses a changed label; the mask
    generator is deterministic in its seed and stays below 2^bits."""
    a, b = crypto.KeyPair(), crypto.KeyPair()
    assert a.agree(b.public, b"x") == b.agree(a.public, b"x") != a.agree(b.public, b"y")
    key = a.agree(b.public, b"x")
    sealed = crypto.seal(key, b"share", b"label")
    assert crypto.unseal(key, sealed, b"label") == b"share"
    with pytest.raises(InvalidTag):
        crypto.unseal(key, sealed, b"other")
    seed = crypto.random_seed()
    m = crypto.mask(seed, 1000, 20)
    assert np.array_equal(m, crypto.mask(seed, 1000, 20)) and m.max() < 2**20
    assert crypto.KeyPair.from_secret(a.secret()).public == a.public


def _setup(size: int, survivors: int, length: int = 50, degree: int = 6) -> CohortSetup:
    return CohortSetup(b"test", size, survivors, length, bits=32, degree=degree)


def _vectors(size: int, length: int = 50, seed: int = 0) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i: rng.integers(-1000, 1000, length) for i in range(size)}


def _advertised(setup: CohortSetup, vectors: dict[int, np.ndarray]
                ) -> tuple[dict[int, UserSession], CohortAggregator]:
    """Each vector's user session, and a server that has every user's keys (round 0 done)."""
    users = {i: UserSession(setup, i, v) for i, v in vectors.items()}
    server = CohortAggregator(setup)
    for user in users.values():
        server.advertise(user.advertise())
    return users, server


def test_masks_cancel_to_the_exact_sum() -> None:
    """With every user in, the server's result is exactly the sum (negatives included)."""
    vectors = _vectors(12)
    out = run_cohort(_setup(12, 10), vectors)
    assert np.array_equal(out, sum(vectors.values()))


def test_the_rounds_compute_the_ideal_sum_wrapping_included() -> None:
    """With nobody dropping, every round run gives exactly `ideal_sum` (the in-process
    shortcut of learning figures), including sums that wrap mod 2^bits."""
    rng = np.random.default_rng(3)
    vectors = {i: rng.integers(-(2**30), 2**30, 40) for i in range(9)}
    setup = _setup(9, 8, length=40)
    ideal = ideal_sum(setup, vectors)
    assert np.array_equal(run_cohort(setup, vectors), ideal)
    assert not np.array_equal(ideal, sum(vectors.values()))  # some entries wrapped
    plain = sum(vectors.values())
    assert [int(x) for x in ideal] == [(int(x) + 2**31) % 2**32 - 2**31 for x in plain]
    with pytest.raises(ValueError, match="vectors of 40 integers"):
        ideal_sum(setup, {0: np.zeros(39, np.int64)})


def test_sparse_graph_is_symmetric_and_small() -> None:
    """Neighbourhoods are symmetric and of the declared degree in a large cohort."""
    setup = _setup(100, 90, degree=8)
    roster = range(100)
    nbrs = {i: setup.neighbours(i, roster) for i in roster}
    assert all(len(n) == 8 for n in nbrs.values())
    assert all(i in nbrs[j] for i in roster for j in nbrs[i])


@pytest.mark.parametrize("stage", ["keys", "input"])
def test_ten_percent_dropouts_complete_with_the_survivors_sum(stage: str) -> None:
    """10% drop after key agreement (or after sending their input): the result is the sum of
    the survivors' inputs."""
    vectors = _vectors(20)
    dropped = {3, 11}
    if stage == "keys":
        out = run_cohort(_setup(20, 18), vectors, drop_after_keys=dropped)
        expected = sum(v for i, v in vectors.items() if i not in dropped)
    else:
        out = run_cohort(_setup(20, 18), vectors, drop_after_input=dropped)
        expected = sum(vectors.values())  # their inputs arrived; they only skip unmasking
    assert np.array_equal(out, expected)


def test_a_block_of_neighbouring_indices_dropping_leaves_the_cohort_whole() -> None:
    """10% of a cohort of 100 with consecutive indices (claimed together, say by one process
    that died) drop after key agreement: the circle of the neighbour graph scatters them, so
    every survivor keeps a majority of its neighbours and the cohort completes (on the
    circle of plain index order, user 10 would lose 7 of its 14 neighbours)."""
    setup = _setup(100, 90, degree=14)
    vectors = _vectors(100)
    dropped = set(range(10))
    most = max(len(set(setup.neighbours(u, range(100))) & dropped) for u in range(10, 100))
    assert most < 7
    out = run_cohort(setup, vectors, drop_after_keys=dropped)
    assert np.array_equal(out, sum(v for i, v in vectors.items() if i not in dropped))


def test_too_many_dropouts_abort() -> None:
    """60% drop after key agreement: the cohort aborts before anything is unmasked."""
    with pytest.raises(CohortAborted):
        run_cohort(_setup(20, 18), _vectors(20), drop_after_keys=set(range(12)))


def test_honest_user_refuses_a_server_that_names_too_few_survivors() -> None:
    """A malicious server that claims all but one user dropped (to unmask that one) gets no
    shares from an honest user."""
    setup = _setup(6, 5)
    users = {i: UserSession(setup, i, v) for i, v in _vectors(6).items()}
    server = CohortAggregator(setup)
    for u in users.values():
        server.advertise(u.advertise())
    roster = server.roster()
    for i, u in users.items():
        server.share(i, u.share_keys(roster))
    for i, u in users.items():
        u.masked_input(server.inbox(i))
    with pytest.raises(CohortAborted):
        users[1].unmask({0, 1})


def test_malformed_input_is_refused_alone() -> None:
    """A wrong-length, negative or too-large masked vector is refused, its sender counted as
    dropped; three refusals here are more dropouts than the cohort tolerates: it aborts."""
    setup = _setup(10, 8)
    vectors = _vectors(10)
    users, server = _advertised(setup, vectors)
    roster = server.roster()
    for i, u in users.items():
        server.share(i, u.share_keys(roster))
    bad = {0: np.zeros(49, np.uint64), 1: -np.ones(50, np.int64),
           2: np.full(50, 2**32, np.uint64)}
    for i, u in users.items():
        masked = u.masked_input(server.inbox(i))
        if i in bad:
            with pytest.raises(MalformedInput):
                server.submit(i, bad[i])
        else:
            server.submit(i, masked)
    with pytest.raises(MalformedInput):  # nor can anyone submit twice
        server.submit(3, users[3].masked_input(server.inbox(3)))
    assert set(server.inputs) == set(range(3, 10))
    with pytest.raises(CohortAborted):  # 7 < 8 survivors: too few for this setup
        server.unmask_request()


def test_refused_inputs_within_the_dropout_budget_still_release() -> None:
    """One malformed input in a cohort that tolerates it: the others' sum comes out."""
    setup = _setup(10, 9)
    vectors = _vectors(10)
    users, server = _advertised(setup, vectors)
    roster = server.roster()
    for i, u in users.items():
        server.share(i, u.share_keys(roster))
    for i, u in users.items():
        masked = u.masked_input(server.inbox(i))
        if i == 4:
            with pytest.raises(MalformedInput):
                server.submit(i, masked[:-1])
        else:
            server.submit(i, masked)
    survivors = server.unmask_request()
    for i in survivors:
        server.reveal(i, users[i].unmask(survivors))
    assert np.array_equal(server.result(), sum(v for i, v in vectors.items() if i != 4))


def test_masked_vectors_are_uniform_mod_2_to_the_bits() -> None:
    """What users send looks uniform mod 2^bits whatever they hold (all zeros here): a
    chi-square test on the top 4 bits of every entry and a test on the low bit."""
    setup = CohortSetup(b"uniform", 30, 27, 400, bits=32, degree=8)
    trace = CohortTrace()
    run_cohort(setup, {i: np.zeros(400, np.int64) for i in range(30)}, trace=trace)
    words = np.concatenate(list(trace.masked.values()))
    assert words.size == 12_000
    counts = np.bincount((words >> np.uint64(28)).astype(np.int64), minlength=16)
    expected = words.size / 16
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 37.7  # chi-square(15) at p = 0.001
    ones = int((words & np.uint64(1)).sum())
    assert abs(ones - words.size / 2) < 4 * math.sqrt(words.size / 4)


def test_to_signed_centres_the_ring() -> None:
    assert list(to_signed(np.array([0, 1, 2**32 - 1, 2**31], np.uint64), 32)) == [
        0, 1, -1, -(2**31)]


def test_a_member_gets_only_its_neighbours_keys_and_the_cohort_still_sums() -> None:
    """The roster a member receives over HTTP (`wire.roster_body`) names every member but holds
    the keys of its neighbours and itself only; built back (`wire.roster_of`), it serves every
    round, and the sum is exact."""
    setup = _setup(40, 36, degree=6)
    vectors = _vectors(40)
    users, server = _advertised(setup, vectors)
    adverts = server.roster()
    for i, user in users.items():
        body = wire.roster_body(adverts, (i, *setup.neighbours(i, adverts)))
        assert len(body) == 40 and sum(k is not None for k in body.values()) == 7
        server.share(i, user.share_keys(wire.roster_of(body)))
    for i, user in users.items():
        server.submit(i, user.masked_input(server.inbox(i)))
    survivors = server.unmask_request()
    for i in sorted(survivors):
        server.reveal(i, users[i].unmask(survivors))
    assert np.array_equal(server.result(), sum(vectors.values()))
