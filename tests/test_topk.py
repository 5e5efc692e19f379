"""Per-tensor Top-K: the smallest representation is chosen and decodes exactly, error feedback
conserves the residual, and the seed-002 field model (Eq. 9-16) matches hand-computed cases
while the real safetensors bytes differ from it by exactly the header."""

import math

import pytest
import torch
from safetensors.torch import load

from fl_core.models import TwoLayerCNN
from fl_core.payload import serialize
from fl_core.rounds.accounting import (
    REUSE_EVENT_BYTES,
    dense_round_bytes,
    dense_update_bytes,
    header_bytes,
    message_bytes,
    modelled_round_bytes,
    modelled_update_bytes,
    real_bytes,
    real_dense_bytes,
    score_message,
    symmetric_saving,
    uplink_saving,
)
from fl_core.rounds.topk import (
    ErrorFeedback,
    Representation,
    SparseUpdate,
    TopKCodec,
    choose_representation,
    encode_tensor,
    field_bytes,
    keep_count,
)

DENSE, PAIRS, BITMAP = Representation.DENSE, Representation.PAIRS, Representation.BITMAP


@pytest.mark.parametrize(
    ("d", "ratio", "k", "sizes", "chosen"),
    [
        (10, 0.2, 2, (40, 16, 10), BITMAP),  # 2*4 + ceil(10/8) = 10
        (1, 0.2, 1, (4, 8, 5), DENSE),  # k = max(1, 0) = 1
        (3, 0.2, 1, (12, 8, 5), BITMAP),
        (1000, 0.01, 10, (4000, 80, 165), PAIRS),
        (10, 0.9, 9, (40, 72, 38), BITMAP),
        (8, 1.0, 8, (32, 64, 33), DENSE),
    ],
)
def test_field_model_matches_hand_computed_cases(d, ratio, k, sizes, chosen):
    assert keep_count(d, ratio) == k
    got = field_bytes(d, k)
    assert (got[DENSE], got[PAIRS], got[BITMAP]) == sizes
    assert choose_representation(d, k) is chosen


def test_paper_cnn_at_r02_gives_the_seed_topk_saving():
    sizes = [p.numel() for p in TwoLayerCNN((1, 28, 28), 10).parameters()]
    b, b0 = modelled_update_bytes(sizes, 0.2), dense_update_bytes(sizes)
    assert b == sum(4 * math.floor(0.2 * d) + math.ceil(d / 8) for d in sizes)  # bitmap everywhere
    assert round(100 * uplink_saving(10 * b, dense_round_bytes(10, b0)), 2) == 76.88  # seed: 76.88 %
    assert round(100 * symmetric_saving(10 * b, dense_round_bytes(10, b0)), 2) == 38.44  # seed: 38.44 %


def test_round_accounting_equations():
    m_t = modelled_round_bytes([100, 120], reused=3)
    assert m_t == 100 + 120 + 3 * REUSE_EVENT_BYTES == 268
    dense = dense_round_bytes(5, 1000)
    assert dense == 5000
    s = uplink_saving(m_t, dense)
    assert s == pytest.approx(1 - 268 / 5000)
    assert symmetric_saving(m_t, dense) == pytest.approx(1 - (5000 + 268) / 10000) == pytest.approx(s / 2)
    with pytest.raises(ValueError, match="reused"):
        modelled_round_bytes([1], reused=-1)


@pytest.mark.parametrize(("d", "ratio"), [(7, 0.2), (64, 0.2), (300, 0.05), (2000, 0.01), (50, 0.9), (5, 1.0)])
def test_smallest_representation_is_chosen_and_all_forms_decode_exactly(d, ratio):
    x = torch.randn(d, generator=torch.Generator().manual_seed(d))
    k = keep_count(d, ratio)
    forms = {rep: encode_tensor(x, k, rep) for rep in Representation}
    chosen = encode_tensor(x, k)
    assert chosen.field_bytes == min(f.field_bytes for f in forms.values())
    assert chosen.representation is choose_representation(d, k)
    expected = torch.zeros(d)
    top = x.abs().topk(k).indices
    expected[top] = x[top]
    for f in [chosen, *forms.values()]:
        assert torch.equal(f.decode(), expected), f.representation
        data = sum(t.numel() * t.element_size() for t in f.tensors("0").values())
        assert data == f.field_bytes  # the real tensors hold exactly the modelled fields


def test_payload_round_trip_and_real_bytes_exceed_the_model_by_the_header():
    sizes = [3, 800, 1000, 10]
    codec = TopKCodec(sizes, 0.2)
    flat = torch.randn(codec.numel, generator=torch.Generator().manual_seed(0))
    sparse = codec.compress(flat)
    payload = serialize(sparse.to_tensors())
    back = SparseUpdate.from_tensors(load(payload), sizes)
    assert torch.equal(back.decode(), sparse.decode())
    assert real_bytes(sparse) == len(payload) == sparse.field_bytes + header_bytes(payload)
    assert sparse.field_bytes == codec.field_bytes == modelled_update_bytes(sizes, 0.2)
    # a dense update: data = 4 d, plus its header; a reuse event's real message is not 16 bytes
    assert real_dense_bytes(codec.numel) > 4 * codec.numel
    assert message_bytes(score_message(0.5)) != REUSE_EVENT_BYTES


def test_corrupt_payload_is_rejected_naming_the_tensor():
    codec = TopKCodec([64], 0.2)
    tensors = codec.compress(torch.randn(64)).to_tensors()
    assert "0.bitmap" in tensors
    tensors["0.values"] = tensors["0.values"][:-1]
    with pytest.raises(ValueError, match="tensor 0"):
        SparseUpdate.from_tensors(tensors, [64])
    with pytest.raises(ValueError, match="unexpected"):
        SparseUpdate.from_tensors({"9.dense": torch.zeros(1)}, [64])
    with pytest.raises(ValueError, match="values"):
        codec.compress(torch.zeros(65))
    with pytest.raises(ValueError, match="ratio"):
        keep_count(10, 0.0)


def test_error_feedback_conserves_the_residual():
    codec = TopKCodec([40, 24], 0.1)
    ef = ErrorFeedback()
    gen = torch.Generator().manual_seed(1)
    total_in, total_sent = torch.zeros(64), torch.zeros(64)
    old = torch.zeros(64)
    for _ in range(6):
        delta = torch.randn(64, generator=gen)
        compensated = ef.compensate("c", delta)
        sent = codec.compress(compensated).decode()
        new = ef.keep("c", compensated, sent)
        assert torch.equal(sent + new, compensated)  # exact: kept coordinates leave, the rest stay
        assert torch.allclose(sent + new, delta + old)
        assert int((new != 0).sum()) <= 64 - sum(codec.kept)
        total_in += delta
        total_sent += sent
        old = new
    assert torch.allclose(total_sent + old, total_in, atol=1e-5)
    assert set(ef.state()) == {"'c'"}
