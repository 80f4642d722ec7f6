"""Triton kernels of the fused per-feature embedding (ranker.gpu.fused_embedding says what they compute and why).

One program takes one feature and a tile of documents: it reads the tile's raw values of that feature, encodes them
into the feature's piecewise-linear bins, and runs them through the feature's dense layers with every activation in
registers. The forward kernel writes only the last layer's output. The backward kernel recomputes the forward pass
(saving nothing in the forward pass is what the fusion buys: no activation ever goes to memory), then runs it back,
summing the weight gradients of its documents in registers over a chunk of tiles; each chunk's sums are written once
and added up by the caller, so the result does not depend on the order programs run in.

Shapes: `x_t` `[F, N]` (the raw features, transposed so that a tile of one feature is contiguous), `lower`/`inverse`
`[F, B]`, `w0` `[F, B, W]`, `b0` `[F, W]`, `wr` `[L - 1, F, W, W]`, `br` `[L - 1, F, W]`, `out` `[N, F * W]`.
Matrix products take bf16 operands and accumulate in float32, as autocast's do, or with `FP32` float32 operands
in IEEE arithmetic (`--precision fp32`; then the kernels compute exactly what the PyTorch modules compute in float32,
which is how the tests check them on the CPU, in Triton's interpreter). Biases and sums are float32. `BP`, `WP` are B,
W rounded up to the 16 a Triton matrix product needs at least: loads past B or W read zeros, which add nothing, and
stores past them are masked off.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _operand(values, FP32: tl.constexpr):
    """`values` in the dtype the matrix products take."""
    if FP32:
        return values.to(tl.float32)
    else:
        return values.to(tl.bfloat16)


@triton.jit
def _dot(a, b, FP32: tl.constexpr):
    if FP32:
        return tl.dot(a, b, input_precision="ieee")  # not TF32: exactly the float32 modules' arithmetic
    else:
        return tl.dot(a, b)


@triton.jit
def _tile_rows(tile, BLOCK_N: tl.constexpr):
    # 64-bit: a large evaluation batch times F * W output columns passes 2**31 elements.
    return tile.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)


@triton.jit
def _encode(x_t, lower, inverse, feature, rows, N, B, BP: tl.constexpr, FP32: tl.constexpr):
    """`[BLOCK_N, BP]` operands: the tile's values of `feature` as its piecewise-linear bins (ranker.model.encoding)."""
    values = tl.load(x_t + feature * N + rows, mask=rows < N, other=0.0)
    bins = tl.arange(0, BP)
    edge_mask = bins < B
    low = tl.load(lower + feature * B + bins, mask=edge_mask, other=0.0)
    scale = tl.load(inverse + feature * B + bins, mask=edge_mask, other=0.0)
    position = (values[:, None] - low[None, :]) * scale[None, :]
    return _operand(tl.minimum(tl.maximum(position, 0.0), 1.0), FP32)


@triton.jit
def _layer_weight(w, layer, feature, F, rows_in, cols, W_IN, W, FP32: tl.constexpr):
    """`[W_IN padded, WP]` operand: the weight of `feature`'s layer in a stack laid out `[layers, F, W_IN, W]`."""
    offsets = ((layer * F + feature) * W_IN + rows_in[:, None]) * W + cols[None, :]
    return _operand(tl.load(w + offsets, mask=(rows_in[:, None] < W_IN) & (cols[None, :] < W), other=0.0), FP32)


@triton.jit
def _layer_bias(b, layer, feature, F, cols, W):
    return tl.load(b + (layer * F + feature) * W + cols, mask=cols < W, other=0.0)


@triton.jit
def _forward_tile(x_t, lower, inverse, w0, b0, wr, br, feature, rows, N, F, B, W,
                  BP: tl.constexpr, WP: tl.constexpr, LAYERS: tl.constexpr, FP32: tl.constexpr):
    """The tile's encoded bins and every layer's output (after its ReLU, as operands), first layer first."""
    bins, cols = tl.arange(0, BP), tl.arange(0, WP)
    encoded = _encode(x_t, lower, inverse, feature, rows, N, B, BP, FP32)
    hidden = _dot(encoded, _layer_weight(w0, 0, feature, F, bins, cols, B, W, FP32), FP32)
    hidden = _operand(tl.maximum(hidden + _layer_bias(b0, 0, feature, F, cols, W)[None, :], 0.0), FP32)
    outputs = (hidden,)
    for layer in tl.static_range(LAYERS - 1):
        hidden = _dot(hidden, _layer_weight(wr, layer, feature, F, cols, cols, W, W, FP32), FP32)
        hidden = _operand(tl.maximum(hidden + _layer_bias(br, layer, feature, F, cols, W)[None, :], 0.0), FP32)
        outputs = outputs + (hidden,)
    return encoded, outputs


@triton.jit
def embedding_forward_kernel(x_t, lower, inverse, w0, b0, wr, br, out, N, F, B, W,
                             BP: tl.constexpr, WP: tl.constexpr, LAYERS: tl.constexpr, BLOCK_N: tl.constexpr,
                             FP32: tl.constexpr):
    feature, tile = tl.program_id(0), tl.program_id(1)
    rows = _tile_rows(tile, BLOCK_N)
    cols = tl.arange(0, WP)
    _, outputs = _forward_tile(x_t, lower, inverse, w0, b0, wr, br, feature, rows, N, F, B, W, BP, WP, LAYERS, FP32)
    tl.store(out + rows[:, None] * (F * W) + feature * W + cols[None, :], outputs[LAYERS - 1],
             mask=(rows[:, None] < N) & (cols[None, :] < W))


@triton.jit
def embedding_backward_kernel(x_t, lower, inverse, w0, b0, wr, br, grad_out, grad_w0, grad_b0, grad_wr, grad_br,
                              N, F, B, W, tiles_per_chunk,
                              BP: tl.constexpr, WP: tl.constexpr, LAYERS: tl.constexpr, BLOCK_N: tl.constexpr,
                              FP32: tl.constexpr):
    """Weight and bias gradients of one feature over one chunk of tiles, written to that chunk's slot of `grad_*`
    (`[chunks, ...]` beside the parameters' own shapes)."""
    feature, chunk = tl.program_id(0), tl.program_id(1)
    bins, cols = tl.arange(0, BP), tl.arange(0, WP)
    grad_first = tl.zeros((BP, WP), tl.float32)
    grad_first_bias = tl.zeros((WP,), tl.float32)
    grad_rest = ()
    grad_rest_bias = ()
    for _ in tl.static_range(LAYERS - 1):
        grad_rest = grad_rest + (tl.zeros((WP, WP), tl.float32),)
        grad_rest_bias = grad_rest_bias + (tl.zeros((WP,), tl.float32),)
    for tile in range(tiles_per_chunk):
        rows = _tile_rows(chunk * tiles_per_chunk + tile, BLOCK_N)
        encoded, outputs = _forward_tile(x_t, lower, inverse, w0, b0, wr, br, feature, rows, N, F, B, W,
                                         BP, WP, LAYERS, FP32)
        upstream = tl.load(grad_out + rows[:, None] * (F * W) + feature * W + cols[None, :],
                           mask=(rows[:, None] < N) & (cols[None, :] < W), other=0.0).to(tl.float32)
        grad_pre = tl.where(outputs[LAYERS - 1] > 0, upstream, 0.0)  # through the last layer's ReLU
        new_rest = ()
        new_rest_bias = ()
        for layer in tl.static_range(LAYERS - 2, -1, -1):  # the stacked index of layer `layer + 1`, last first
            below = outputs[layer]
            grad_operand = _operand(grad_pre, FP32)
            new_rest = (grad_rest[layer] + _dot(tl.trans(below), grad_operand, FP32),) + new_rest
            new_rest_bias = (grad_rest_bias[layer] + tl.sum(grad_pre, axis=0),) + new_rest_bias
            weight = _layer_weight(wr, layer, feature, F, cols, cols, W, W, FP32)
            grad_pre = tl.where(below > 0, _dot(grad_operand, tl.trans(weight), FP32), 0.0)
        grad_rest = new_rest
        grad_rest_bias = new_rest_bias
        grad_first += _dot(tl.trans(encoded), _operand(grad_pre, FP32), FP32)
        grad_first_bias += tl.sum(grad_pre, axis=0)
    square = (cols[:, None] < W) & (cols[None, :] < W)
    tl.store(grad_w0 + ((chunk * F + feature) * B + bins[:, None]) * W + cols[None, :], grad_first,
             mask=(bins[:, None] < B) & (cols[None, :] < W))
    tl.store(grad_b0 + (chunk * F + feature) * W + cols, grad_first_bias, mask=cols < W)
    for layer in tl.static_range(LAYERS - 1):
        slot = (chunk * (LAYERS - 1) + layer) * F + feature
        tl.store(grad_wr + (slot * W + cols[:, None]) * W + cols[None, :], grad_rest[layer], mask=square)
        tl.store(grad_br + slot * W + cols, grad_rest_bias[layer], mask=cols < W)


def padded(size: int) -> int:
    """`size` rounded up to a power of two, and to at least 16 (a Triton matrix product's smallest side)."""
    return max(16, triton.next_power_of_2(size))
