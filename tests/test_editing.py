"""Exactness part (b): after any edit sequence the statistics and model equal a fresh fit on
the resulting subset; plus determinism of contributions and the handling of bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fl_core.contribution import Contribution
from fl_core.editors import FixedRatio, FixedSize, build_editor
from fl_core.errors import DuplicateClientError, EditError, EmptyPopulationError, UnknownClientError
from fl_core.fisher import new_sum
from fl_core.payload import ByteKind
from fl_core.projection import ProjectionConfig, project
from fl_core.stats import SufficientStatistics


def fresh_stats(tiny, pool, members):
    stats = SufficientStatistics(tiny.w0.numel(), new_sum(pool.trainer.config.fisher, tiny.model_fn()))
    stats.apply(joined=[pool.trainer.contribute(c, pool.data_of(c)) for c in sorted(members)])
    return stats


def assert_same_statistics(a: SufficientStatistics, b: SufficientStatistics) -> None:
    assert set(a.members) == set(b.members)
    torch.testing.assert_close(a.weight_sum, b.weight_sum, rtol=0, atol=1e-9)
    if a.b is not None:
        torch.testing.assert_close(a.b, b.b, rtol=0, atol=1e-9)
        v = torch.randn(a.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(a.fisher_sum.matvec(v), b.fisher_sum.matvec(v), rtol=1e-9, atol=1e-9)


def edit_sequence(editor, rng, first_new=8, steps=10):
    nxt = first_new
    for _ in range(steps):
        present = sorted(editor.clients)
        u = rng.random()
        if u < 0.35 and len(present) > 5:
            editor.remove(present[rng.integers(len(present))])
        elif u < 0.7 and nxt < 12:
            editor.add(nxt)
            nxt += 1
        elif len(present) > 5 and nxt < 12:
            editor.batch([present[rng.integers(len(present))]], [nxt])
            nxt += 1


@pytest.mark.parametrize(
    ("fisher", "rule"),
    [
        ("diagonal", FixedSize(3)),
        ("diagonal", FixedRatio(0.5)),
        ("kfac", FixedSize(3)),
        pytest.param("full", FixedRatio(0.4), marks=pytest.mark.slow),
    ],
)
def test_state_after_edits_equals_fresh_fit(tiny, fisher, rule):
    pool = tiny.pool(fisher)
    # The edit's warm-started solve and the fresh cold one stop at different points within the
    # tolerance; with the full Fisher at damping 1e-4, tol 1e-9 left them up to 6e-5 apart on
    # some subsets (seed-dependent), tol 1e-11 leaves ~1e-7 (float32 rounding of the model).
    cfg = ProjectionConfig(tol=1e-11, max_iter=6000, damping=1e-4)
    editor = build_editor("fsosa", pool, np.random.default_rng(11), rule, cfg)
    editor.fit(range(8))
    edit_sequence(editor, np.random.default_rng(5))
    fresh = fresh_stats(tiny, pool, editor.members)
    assert_same_statistics(editor.stats, fresh)
    w_fresh, _ = project(fresh, cfg)
    torch.testing.assert_close(editor.model, w_fresh, rtol=1e-4, atol=1e-5)
    assert editor.members <= editor.clients


def test_contribution_is_deterministic_alone_or_later(tiny):
    a = tiny.pool("kfac", reuse=False)
    first = a.train(3)
    for c in (5, 1):
        a.train(c)
    again = a.train(3)
    other = tiny.pool("kfac", reuse=False).train(3)
    for x in (again, other):
        assert torch.equal(first.weights, x.weights)
        for k, t in first.fisher.tensors().items():
            assert torch.equal(t, x.fisher.tensors()[k])
        assert x.digest == first.digest


def test_untriggered_edit_keeps_model_and_costs_only_control(tiny):
    pool = tiny.pool("diagonal")
    editor = build_editor("fsosa", pool, np.random.default_rng(0), FixedSize(2))
    editor.fit(range(8))
    outsider = next(c for c in range(8) if c not in editor.members)
    before = editor.model.clone()
    report = editor.remove(outsider)
    assert not report.triggered and torch.equal(editor.model, before)
    assert report.total_bytes == report.bytes[ByteKind.CONTROL.value] > 0


def test_triggered_edit_trains_only_the_change(tiny):
    pool = tiny.pool("diagonal")
    editor = build_editor("fsosa", pool, np.random.default_rng(0), FixedSize(3))
    editor.fit(range(8))
    member = sorted(editor.members)[0]
    report = editor.remove(member)
    assert report.triggered and report.left == (member,) and len(report.joined) == 1
    assert report.trained == report.joined
    one = pool.train(report.joined[0])
    assert report.bytes["model_upload"] == 2 * one.model_bytes  # replaced member + new member
    assert report.bytes["fisher_upload"] == 2 * one.fisher_bytes
    retrain = build_editor("retrain", tiny.pool("diagonal"), np.random.default_rng(0), FixedSize(3))
    retrain.fit(range(8))
    r = retrain.remove(member)
    assert len(r.trained) == 3 and r.bytes["model_upload"] == 3 * one.model_bytes


def snapshot(editor):
    return (
        set(editor.clients),
        set(editor.members),
        editor.model.clone(),
        editor.stats.weight_sum.clone(),
        dict(editor.stats.fingerprints),
    )


def assert_unchanged(editor, snap):
    clients, members, model, wsum, fps = snap
    assert editor.clients == clients and editor.members == members
    assert torch.equal(editor.model, model) and torch.equal(editor.stats.weight_sum, wsum)
    assert editor.stats.fingerprints == fps


class BrokenPool:
    """A pool whose client ``bad`` uploads a broken contribution."""

    def __init__(self, pool, bad, how):
        self.inner, self.bad, self.how = pool, bad, how
        self.trainer = pool.trainer

    def train(self, c):
        good = self.inner.train(c)
        if c != self.bad:
            return good
        w = good.weights.clone()
        if self.how == "nan":
            w[0] = float("nan")
        elif self.how == "dtype":
            w = w.to(torch.int32)
        else:
            w = w[:-1]
        return Contribution(c, w, good.fisher, good.num_samples)

    def recall(self, c):
        return self.inner.recall(c)

    def forget(self, c):
        self.inner.forget(c)


@pytest.mark.parametrize("how", ["nan", "shape", "dtype"])
def test_a_bad_arrival_is_quarantined_and_state_kept(tiny, how):
    pool = BrokenPool(tiny.pool("diagonal"), bad=20, how=how)
    pool.data_of = pool.inner.data_of
    editor = build_editor("fsosa", pool, np.random.default_rng(1), FixedRatio(1.0))
    editor.fit(range(6))
    snap = snapshot(editor)
    tiny.data[20] = tiny.data[0]
    try:
        report = editor.add(20)
    finally:
        del tiny.data[20]
    assert list(report.quarantined) == [20] and "client 20" in report.quarantined[20]
    assert not report.triggered and 20 in editor.quarantined
    assert_unchanged(editor, snap)
    with pytest.raises(UnknownClientError, match="client 20 is not in the current client set .quarantined"):
        editor.remove(20)
    editor.add(6)  # the editor still works afterwards


class CachedPool:
    """Each client's contribution computed once and kept across editors (``bad``: NaN weights)."""

    def __init__(self, pool, bad):
        self.inner, self.bad, self.trainer, self.cache = pool, bad, pool.trainer, {}

    def data_of(self, c):
        return self.inner.data_of(0 if c == self.bad else c)

    def train(self, c):
        if c not in self.cache:
            good = self.inner.trainer.contribute(c, self.data_of(c))
            if c == self.bad:
                good = Contribution(c, torch.full_like(good.weights, float("nan")), good.fisher, good.num_samples)
            self.cache[c] = good
        return self.cache[c]

    recall = train

    def forget(self, c):
        pass


def test_a_bad_stranger_cannot_block_a_departure(tiny):
    """The case: P = 3, fit([0, 1, 2]), an arrival v4 with a NaN upload that stays a
    non-member, then remove(0) must draw v4; v4 is quarantined instead of failing forever."""
    pool = CachedPool(tiny.pool("diagonal"), bad="v4")
    for seed in range(100):  # until v4 stays outside the subset (probability 1/4); else it is refused at once
        editor = build_editor("fsosa", pool, np.random.default_rng(seed), FixedSize(3))
        editor.fit([0, 1, 2])
        report = editor.add("v4")
        if not report.quarantined:
            assert not report.triggered
            break
        assert "v4" not in editor.clients and not report.triggered  # it joined the subset: quarantined at once
    with pytest.raises(EmptyPopulationError, match=r"P=3 needs at least 3 clients.*client 'v4'.*NaN"):
        editor.remove(0)  # without v4, P = 3 cannot be kept: refused as if v4 had left
    assert "v4" in editor.clients and not editor.quarantined  # refused as a whole
    editor = build_editor("fsosa", pool, np.random.default_rng(5), FixedSize(3))
    editor.fit([0, 1, 2, 3])
    editor.add("v4")
    member = sorted(editor.members - {"v4"}, key=str)[0]
    report = editor.remove(member)
    assert "v4" not in editor.clients and "v4" not in editor.members and editor.clients == {0, 1, 2, 3} - {member}
    assert set(report.quarantined) <= {"v4"}
    assert_same_statistics(editor.stats, fresh_stats(tiny, tiny.pool("diagonal"), editor.members))


@pytest.mark.slow
def test_quarantine_keeps_the_subset_law_exact(tiny):
    """Chi-square: a bad client 9 arrives, then member or not, client 0 leaves. In the runs where
    9 was quarantined (at its arrival or when the departure drew it), the final subset is uniform
    over the size-P subsets of the remaining clients {1, 2, 3, 4}."""
    import itertools

    from scipy import stats

    pool = CachedPool(tiny.pool("diagonal"), bad=9)
    for c in range(10):
        pool.train(c)
    rng = np.random.default_rng(12)
    counts: dict[tuple, int] = {}
    for _ in range(4000):
        editor = build_editor("fsosa", pool, rng, FixedSize(2), ProjectionConfig(damping=1e-4))
        editor.fit([0, 1, 2, 3, 4])
        editor.add(9)
        editor.remove(0)
        assert 9 not in editor.members
        if 9 in editor.quarantined:
            assert editor.clients == {1, 2, 3, 4}
            key = tuple(sorted(editor.members))
            counts[key] = counts.get(key, 0) + 1
    support = list(itertools.combinations([1, 2, 3, 4], 2))
    observed = np.array([counts.get(t, 0) for t in support], dtype=float)
    # about 1,500 quarantined runs (38 %) over 6 cells: 250 expected in each, a 30 % bias in one
    # cell is caught (the bug this guards against, rewinding the random state, gave 4x biases)
    assert observed.sum() > 1200
    assert stats.chisquare(observed, np.full(len(support), observed.sum() / len(support))).pvalue > 1e-3


def test_bad_requests_are_clear_errors_and_state_kept(tiny):
    editor = build_editor("fsosa", tiny.pool("diagonal"), np.random.default_rng(2), FixedSize(3))
    with pytest.raises(EditError, match="fit"):
        editor.remove(0)
    with pytest.raises(EmptyPopulationError):
        editor.fit([])
    editor.fit(range(5))
    snap = snapshot(editor)
    with pytest.raises(UnknownClientError, match="client 42"):
        editor.remove(42)
    with pytest.raises(DuplicateClientError, match="client 3"):
        editor.add(3)
    with pytest.raises(DuplicateClientError):
        editor.batch([1], [6, 6])
    with pytest.raises(UnknownClientError, match="client 99"):
        editor.batch([0, 1, 2], [99])  # 99 has no data, and with 3 clients left it must train
    assert_unchanged(editor, snap)
    editor.remove(0)
    editor.remove(1)
    snap = snapshot(editor)
    with pytest.raises(EmptyPopulationError, match="P=3"):
        editor.remove(2)
    assert_unchanged(editor, snap)


def test_coordinator_state_does_not_grow_with_history(tiny):
    editor = build_editor("fsosa", tiny.pool("kfac", epochs=1), np.random.default_rng(3), FixedSize(3))
    editor.fit(range(6))
    sizes = []
    nxt, rng = 6, np.random.default_rng(4)
    for _ in range(40):
        present = sorted(editor.clients)
        if len(present) > 6 or (len(present) > 4 and rng.random() < 0.5):
            editor.remove(present[rng.integers(len(present))])
        else:
            tiny.data.setdefault(nxt, tiny.data[nxt % 12])
            editor.add(nxt)
            nxt += 1
        assert set(editor.stats.fingerprints) == editor.members  # no departed client is kept
        sizes.append(editor.state_bytes())
    # the state is the statistics plus P = 3 member ids and fingerprints: ids growing from one to
    # two digits add 2 x 3 bytes at most, one leaked fingerprint would add more than 70
    assert max(sizes) - sizes[0] <= 6, (sizes[0], max(sizes))


def test_fedavg_is_the_sample_weighted_mean_and_fedfisher_uses_everyone(tiny):
    pool = tiny.pool("diagonal")
    fedavg = build_editor("fedavg", pool, np.random.default_rng(0))
    report = fedavg.fit(range(6))
    n = torch.tensor([float(pool.train(c).num_samples) for c in range(6)], dtype=torch.float64)
    assert n.max() > 1.5 * n.min()  # the split is skewed enough for the weighting to matter
    models = torch.stack([pool.train(c).weights for c in range(6)]).double()
    torch.testing.assert_close(fedavg.model, ((n[:, None] * models).sum(0) / n.sum()).float())
    uniform = build_editor("fedavg", pool, np.random.default_rng(0), projection=ProjectionConfig(weighting="uniform"))
    uniform.fit(range(6))
    torch.testing.assert_close(uniform.model, models.mean(0).float())
    assert report.bytes["fisher_upload"] == 0
    fedfisher = build_editor("fedfisher", pool, np.random.default_rng(0))
    assert len(fedfisher.fit(range(6)).joined) == 6


def test_float16_uploads_halve_the_bytes_and_stay_exact(tiny):
    full = tiny.pool("kfac").train(2)
    half_pool = tiny.pool("kfac", upload_dtype="float16")
    half = half_pool.train(2)
    assert half.weights.dtype == torch.float16
    assert half.model_bytes < 0.55 * full.model_bytes and half.fisher_bytes < 0.55 * full.fisher_bytes
    editor = build_editor(
        "fsosa", half_pool, np.random.default_rng(3), FixedSize(3), ProjectionConfig(tol=1e-9, max_iter=3000)
    )
    editor.fit(range(8))
    edit_sequence(editor, np.random.default_rng(9))
    assert_same_statistics(editor.stats, fresh_stats(tiny, half_pool, editor.members))


def test_low_rank_uploads_cost_less_and_stay_exact(tiny):
    whole = tiny.pool("kfac").train(2)
    low_pool = tiny.pool("kfac", fisher_rank=3)
    low = low_pool.train(2)
    assert low.fisher_bytes < 0.5 * whole.fisher_bytes and low.digest != whole.digest
    editor = build_editor(
        "fsosa", low_pool, np.random.default_rng(3), FixedSize(3), ProjectionConfig(tol=1e-9, max_iter=3000)
    )
    editor.fit(range(8))
    edit_sequence(editor, np.random.default_rng(9))
    fresh_pool = tiny.pool("kfac", fisher_rank=3)
    fresh = SufficientStatistics(tiny.w0.numel(), new_sum("kfac", tiny.model_fn()))
    fresh.apply(joined=[fresh_pool.train(c) for c in sorted(editor.members)])
    assert_same_statistics(editor.stats, fresh)


def test_a_report_as_dict_is_a_json_ready_copy(tiny):
    """A record holds what the edit reported, and editing the record cannot reach the report."""
    import dataclasses
    import json

    pool = tiny.pool("diagonal")
    editor = build_editor("fsosa", pool, np.random.default_rng(0), FixedSize(3))
    report = editor.fit(range(8))
    report.client_compute_s[99] = 0.5
    d = report.as_dict()
    expected = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    expected = json.loads(
        json.dumps(
            {**expected, "solve": report.solve.as_dict() if report.solve else None, "total_bytes": report.total_bytes},
            default=str,
        )
    )
    assert json.loads(json.dumps(d, default=str)) == expected
    assert d["transfers"] and isinstance(d["trained"], list)
    d["transfers"][0]["bytes"] = -1
    d["bytes"][ByteKind.CONTROL.value] = -1
    assert report.transfers[0]["bytes"] >= 0 and report.bytes[ByteKind.CONTROL.value] >= 0
