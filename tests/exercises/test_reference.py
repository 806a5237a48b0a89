"""The reference against a plain loop over heads, the block identity of W_O, and independent numbers (§4.5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reference.mha.solution import attention_param_count, head_entropy, multi_head_attention


def loop_over_heads(X, W_Q, W_K, W_V, W_O, h, causal=True):
    """Textbook definition, one head at a time, batch by batch: slow and obviously right."""
    B, T, _ = X.shape
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    out = np.zeros((B, T, W_O.shape[1]))
    for b in range(B):
        heads = []
        for i in range(h):
            q = X[b] @ W_Q[:, i * d_k:(i + 1) * d_k]
            k = X[b] @ W_K[:, i * d_k:(i + 1) * d_k]
            v = X[b] @ W_V[:, i * d_v:(i + 1) * d_v]
            s = q @ k.T / math.sqrt(d_k)
            for t in range(T):
                row = s[t, : t + 1] if causal else s[t]
                w = np.exp(row - row.max())
                w /= w.sum()
                s[t] = 0
                s[t, : len(w)] = w
            heads.append(s @ v)
        out[b] = np.concatenate(heads, axis=1) @ W_O
    return out


def random_layer(rng, B, T, d, h, d_k, d_v, d_out):
    return (rng.standard_normal((B, T, d)), rng.standard_normal((d, h * d_k)), rng.standard_normal((d, h * d_k)),
            rng.standard_normal((d, h * d_v)), rng.standard_normal((h * d_v, d_out)), h)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", [(2, 5, 8, 3, 4, 3, 6), (1, 1, 4, 1, 4, 4, 4), (3, 7, 6, 4, 5, 2, 9), (1, 6, 12, 6, 2, 2, 12)])
def test_matches_loop_over_heads(shape, causal):
    args = random_layer(np.random.default_rng(1), *shape)
    np.testing.assert_allclose(multi_head_attention(*args, causal=causal), loop_over_heads(*args, causal=causal),
                               rtol=1e-10, atol=1e-12)


def test_concatenate_then_project_equals_sum_over_heads():
    """Block identity: concat(heads) @ W_O = Σ_i head_i @ W_O[i·d_v:(i+1)·d_v]."""
    X, W_Q, W_K, W_V, W_O, h = random_layer(np.random.default_rng(2), 2, 6, 8, 4, 3, 5, 7)
    d_v = W_V.shape[1] // h
    total = np.zeros((2, 6, 7))
    for i in range(h):
        # A one-head layer on head i's columns, projected by block i of W_O.
        cols_k = slice(i * 3, (i + 1) * 3)
        cols_v = slice(i * d_v, (i + 1) * d_v)
        total += multi_head_attention(X, W_Q[:, cols_k], W_K[:, cols_k], W_V[:, cols_v], W_O[cols_v], 1)
    np.testing.assert_allclose(multi_head_attention(X, W_Q, W_K, W_V, W_O, h), total, rtol=1e-10, atol=1e-12)


def test_unbatched_input_gives_unbatched_output():
    X, *weights, h = random_layer(np.random.default_rng(3), 1, 5, 6, 2, 3, 3, 4)
    out = multi_head_attention(X[0], *weights, h)
    assert out.shape == (5, 4)
    np.testing.assert_array_equal(out, multi_head_attention(X, *weights, h)[0])


def test_causal_mask_hides_the_future():
    X, *weights, h = random_layer(np.random.default_rng(4), 1, 6, 4, 2, 2, 2, 4)
    changed = X.copy()
    changed[0, 4:] += 10.0  # change tokens 4 and 5 only
    before, after = multi_head_attention(X, *weights, h), multi_head_attention(changed, *weights, h)
    np.testing.assert_array_equal(before[0, :4], after[0, :4])
    assert not np.allclose(before[0, 4:], after[0, 4:])


def test_large_logits_stay_finite():
    X, *weights, h = random_layer(np.random.default_rng(5), 2, 4, 4, 2, 2, 2, 4)
    out = multi_head_attention(X * 100.0, *weights, h)  # scores reach about 1e4
    assert np.isfinite(out).all()


@pytest.mark.parametrize("shapes, h, fragment", [
    (((2, 4, 6), (6, 10), (6, 10), (6, 10), (10, 6)), 3, "divisible by h = 3"),
    (((2, 4, 6), (5, 6), (5, 6), (5, 6), (6, 6)), 2, "d = 6"),
    (((2, 4, 6), (6, 6), (6, 6), (6, 6), (4, 6)), 2, "W_O must be"),
    (((4,), (6, 6), (6, 6), (6, 6), (6, 6)), 2, "X must be"),
])
def test_bad_shapes_raise_value_error_naming_them(shapes, h, fragment):
    arrays = [np.zeros(s) for s in shapes]
    with pytest.raises(ValueError, match=fragment):
        multi_head_attention(*arrays, h)


@pytest.mark.parametrize("args, kwargs, expected", [
    ((768, 12), {"bias": True}, 2_362_368),  # GPT-2 small, one layer
    ((1024, 16), {"bias": True}, 4_198_400),  # GPT-2 medium
    ((3072, 16), {"d_k": 256}, 50_331_648),  # Gemma 7B: h·d_k = 4096 > d
    ((4096, 32), {}, 67_108_864),  # Llama-3-8B-sized, no bias
])
def test_param_counts_of_real_models(args, kwargs, expected):
    count = attention_param_count(*args, **kwargs)
    assert count == expected and type(count) is int


def test_gpt2_small_attention_over_12_layers():
    assert 12 * attention_param_count(768, 12, bias=True) == 28_348_416


def test_param_count_needs_d_k_when_h_does_not_divide_d():
    with pytest.raises(ValueError, match="not divisible"):
        attention_param_count(10, 3)
    assert attention_param_count(10, 3, d_k=4) == 4 * 10 * 12


def uniform_causal(T):
    return np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]


def test_uniform_causal_entropy_is_log_factorial_over_T():
    assert head_entropy(uniform_causal(6)) == pytest.approx(1.0965418686683, abs=1e-12)
    for T in (1, 2, 9, 16):
        assert head_entropy(uniform_causal(T)) == pytest.approx(math.lgamma(T + 1) / T, rel=1e-12)


def test_entropy_shapes_and_edge_rows():
    A = np.broadcast_to(uniform_causal(5), (2, 3, 5, 5))  # (B, h, T, T)
    assert head_entropy(A).shape == (2, 3)
    assert head_entropy(np.eye(4)) == 0.0  # one-hot rows carry no uncertainty
    wide = np.full((2, 3, 8), 1 / 8)  # (h, T_q=3, T_k=8)
    np.testing.assert_allclose(head_entropy(wide), [math.log(8)] * 2)
