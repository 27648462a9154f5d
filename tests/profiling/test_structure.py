"""Structure counting: FLOPs, bytes, kernels and memory per layer, checked against hand-computed values."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from srift.domain.structure import Affine, ModelStructure, Precision
from srift.errors import InvalidInput
from srift.profiling import testmodels
from srift.profiling.structure import _CudaAutocastFloat32, count_structure, leading_dimension
from srift.refmodels import REFERENCE_MODELS, nets


def _linear() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 4, bias=False))


def _linear_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 8)


def _layer(structure: ModelStructure, name: str) -> Any:
    return next(layer for layer in structure.layers if layer.name == name)


@pytest.mark.parametrize("fake", [True, False])
def test_one_linear_layer_counts_match_hand_computation(fake: bool) -> None:
    s = count_structure(_linear, _linear_input, fake=fake)
    fc = _layer(s, "0")
    # y = x Wᵀ: 2·b·8·4 FLOPs; reads x (32 B per sample) and W (128 B), writes y (16 B per sample).
    assert fc.forward.matmul_flops == Affine(0.0, 64.0)
    assert fc.forward.matmul_bytes == Affine(128.0, 48.0)
    # Backward: only dW = dyᵀ x (x needs no gradient): the same FLOPs and bytes.
    assert fc.backward.matmul_flops == Affine(0.0, 64.0)
    assert fc.backward.matmul_bytes == Affine(128.0, 48.0)
    assert fc.forward.kernels == 1
    mem = s.memory
    assert (mem.parameter_bytes, mem.gradient_bytes, mem.optimizer_state_bytes) == (128, 128, 256)
    # The default loss (the output's mean) runs outside the model.
    assert _layer(s, "<loss>").forward.other_bytes.per_sample > 0
    # Plain SGD reads the parameter and its gradient and writes the parameter: 3 × 128 B.
    assert s.update_bytes == 3 * 128


def test_fake_and_real_tensors_count_the_same() -> None:
    fake = count_structure(testmodels.cnn, testmodels.cnn_input, fake=True)
    real = count_structure(testmodels.cnn, testmodels.cnn_input, fake=False)
    assert fake.layers == real.layers
    assert fake.memory == real.memory


def test_autocast_halves_matmul_bytes_but_gradients_keep_their_float32_dtype() -> None:
    fp32 = count_structure(_linear, _linear_input, precision=Precision.FP32)
    fp16 = count_structure(_linear, _linear_input, precision=Precision.FP16)
    assert fp16.precision is Precision.FP16
    # Under autocast the product reads fp16 copies of x and W and writes fp16 y.
    assert _layer(fp16, "0").forward.matmul_bytes == Affine(64.0, 24.0)
    assert _layer(fp16, "0").forward.matmul_flops == _layer(fp32, "0").forward.matmul_flops
    # The parameters stay float32, so their gradients do too (gradient bytes follow the gradients' dtype).
    assert fp16.memory.gradient_bytes == fp32.memory.gradient_bytes == 128


def test_a_half_precision_model_has_half_precision_gradients() -> None:
    s = count_structure(lambda: _linear().half(), lambda b: _linear_input(b).half())
    assert s.memory.gradient_bytes == s.memory.parameter_bytes == 64


def test_cuda_float32_operators_run_in_float32_under_cpu_autocast() -> None:
    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        low = torch.nn.functional.linear(x, torch.randn(8, 8))
        assert torch.softmax(low, -1).dtype == torch.float16  # CPU autocast alone keeps fp16
        with _CudaAutocastFloat32():
            assert torch.softmax(low, -1).dtype == torch.float32
            assert nn.functional.layer_norm(low, (8,)).dtype == torch.float32
            assert nn.functional.linear(low, torch.randn(8, 8)).dtype == torch.float16


def test_backward_order_runs_from_the_last_layer_to_the_first() -> None:
    def mlp() -> nn.Module:
        return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

    s = count_structure(mlp, _linear_input)
    order = {layer.name: layer.backward_order for layer in s.layers if layer.name in ("0", "2", "4")}
    assert order["4"] < order["2"] < order["0"]
    assert [layer.name for layer in s.layers][:5] == ["0", "1", "2", "3", "4"]


def test_memory_grows_with_the_batch_by_the_activations() -> None:
    s = count_structure(testmodels.wide_mlp, testmodels.wide_mlp_input)
    act = s.memory.activation_bytes
    # Each sample keeps (at least) the 2048 + 2048 + 1024 float32 hidden activations for backward.
    assert act.per_sample >= 4 * (2048 + 2048 + 1024)
    assert s.memory.saved_bytes.per_sample >= 4 * (2048 + 2048 + 1024)
    assert s.memory.step_bytes(10) > s.memory.step_bytes(1)


def test_a_model_that_fails_everywhere_is_a_clear_error() -> None:
    def broken() -> nn.Module:
        raise RuntimeError("no weights here")

    with pytest.raises(InvalidInput) as caught:
        count_structure(broken, _linear_input)
    assert "no weights here" in caught.value.detail and caught.value.field == "model_factory"
    assert caught.value.hint == "make the model's forward and backward run at batch 2 and 4 on the CPU"


def _frozen_linear() -> nn.Module:
    return nn.Linear(8, 4).requires_grad_(False)


@pytest.mark.parametrize(
    ("factory", "says"),
    [
        (nn.ReLU, "the model (ReLU) has no parameters"),
        (lambda: nn.Sequential(nn.ReLU(), nn.Identity()), "the model (Sequential) has no parameters"),
        (_frozen_linear, "none of the model's 2 parameter tensors is trainable"),
    ],
    ids=["relu", "parameter-free-sequential", "frozen-linear"],
)
@pytest.mark.parametrize("fake", [None, False])
def test_a_model_with_nothing_to_train_is_refused_for_that_reason(
    factory: Callable[[], nn.Module], says: str, fake: bool | None
) -> None:
    """A parameter-free (or wholly frozen) module runs forward fine; what is wrong is that its step has no
    gradient to all-reduce and nothing to update. The message says so and how to fix it, rather than torch's
    "optimizer got an empty parameter list" under the hint to make the model run at batch 2 and 4, which it
    does."""
    with pytest.raises(InvalidInput) as caught:
        count_structure(factory, _linear_input, fake=fake)
    error = caught.value
    assert error.field == "model_factory"
    assert error.detail.startswith(says) and "nothing to train and no gradient to all-reduce" in error.detail
    assert "requires_grad=True" in error.hint and "batch 2 and 4" not in error.hint
    assert "optimizer got an empty parameter list" not in str(error)


def test_structure_documents_round_trip_and_name_bad_fields() -> None:
    s = count_structure(testmodels.cnn, testmodels.cnn_input, precision="bf16")
    again = ModelStructure.from_dict(s.to_dict())
    assert again == s
    doc = s.to_dict()
    doc["layers"][1]["forward"]["matmul_flops"] = [1.0, -2.0]
    with pytest.raises(InvalidInput) as caught:
        ModelStructure.from_dict(doc)
    assert caught.value.field == "structure.layers[1].forward.matmul_flops"


def _bert_flops() -> int:
    s, h, f, heads = nets.BERT_SEQ, 768, 3072, 12
    per_layer = 4 * 2 * s * h * h + 2 * 2 * s * h * f + 2 * 2 * heads * s * s * (h // heads)
    return 12 * per_layer + 2 * s * h * 2


def _gpt2_flops() -> int:
    s, h, heads, v = nets.GPT2_SEQ, 768, 12, nets.GPT2_VOCAB
    per_layer = (
        2 * s * h * 3 * h + 2 * s * h * h + 2 * 2 * s * h * 4 * h + 2 * 2 * heads * s * s * (h // heads)
    )
    return 12 * per_layer + 2 * s * h * v


def _vit_flops() -> int:
    t, h, heads = 197, 768, 12
    per_layer = (
        2 * t * h * 3 * h + 2 * t * h * h + 2 * 2 * t * h * 3072 + 2 * 2 * heads * t * t * (h // heads)
    )
    return 2 * 196 * h * 3 * 16 * 16 + 12 * per_layer + 2 * h * 1000


@functools.cache
def _fresh_count(name: str, precision: Precision) -> str:
    """`python -m srift.refmodels.build`'s fresh count of reference model `name` (on fake tensors), as JSON
    text (no shared mutable document), made once per process: ResNet-50's fp32 count is read by two tests."""
    from srift.refmodels.build import count

    return json.dumps(count(next(r for r in REFERENCE_MODELS if r.name == name), precision))


@pytest.mark.parametrize(
    ("name", "forward_flops"),
    [
        # torchvision's table gives ResNet-50 4.09 G multiply-adds per 224×224 image (2 FLOPs each).
        ("resnet50", None),
        ("bert-base", _bert_flops()),
        ("gpt2-small", _gpt2_flops()),
        ("vit-b16", _vit_flops()),
    ],
)
def test_reference_models_have_their_published_size_and_flops(name: str, forward_flops: int | None) -> None:
    ref = next(r for r in REFERENCE_MODELS if r.name == name)
    s = ModelStructure.from_dict(json.loads(_fresh_count(name, Precision.FP32)))
    assert s.memory.parameter_bytes == 4 * ref.parameters
    flops = s.forward.matmul_flops.per_sample
    if forward_flops is None:
        assert math.isclose(flops, 2 * 4.09e9, rel_tol=0.01)
    else:
        assert flops == forward_flops
    # Backward computes both the input and the weight gradients: about twice the forward's products.
    assert 1.9 < s.backward.matmul_flops.per_sample / flops < 2.6


def _conv_then_linear() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))


def _image_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 8, 8)


def test_convolution_flops_are_kept_apart_from_matrix_products() -> None:
    s = count_structure(_conv_then_linear, _image_input)
    conv, fc = _layer(s, "0"), _layer(s, "2")
    # The convolution: 2 · (4 · 6 · 6 outputs) · (3 · 3 · 3 taps) FLOPs per sample, all of them convolution's.
    assert conv.forward.matmul_flops.per_sample == 2 * 4 * 36 * 27
    assert conv.forward.conv_flops == conv.forward.matmul_flops
    assert conv.backward.conv_flops == conv.backward.matmul_flops
    assert conv.forward.product_flops == Affine(0.0, 0.0)
    assert fc.forward.conv_flops == Affine(0.0, 0.0)
    assert fc.forward.product_flops == fc.forward.matmul_flops
    assert ModelStructure.from_dict(s.to_dict()) == s


class _Attention(nn.Module):
    """Causal self-attention through F.scaled_dot_product_attention, with attention dropout."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.dropout = dropout
        self.proj = nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (t.view(b, s, 2, 8).transpose(1, 2) for t in self.proj(x).split(16, dim=2))
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout, is_causal=True
        )


def _attention_bytes(structure: ModelStructure) -> float:
    """Bytes per sample the attention (the root module's own work: the split and the attention call) moves
    in forward and backward."""
    root = _layer(structure, "<root>")
    return sum(w.matmul_bytes.per_sample + w.other_bytes.per_sample for w in (root.forward, root.backward))


@pytest.mark.parametrize("precision", [Precision.FP32, Precision.BF16])
def test_attention_with_dropout_is_counted_fused_as_cuda_runs_it(precision: Precision) -> None:
    def inputs(seq: int) -> Any:
        return lambda batch: torch.randn(batch, seq, 16)

    with_dropout = count_structure(lambda: _Attention(0.1), inputs(64), precision=precision)
    without = count_structure(lambda: _Attention(0.0), inputs(64), precision=precision)
    assert with_dropout.layers == without.layers
    # Fused, the bytes grow with the sequence (q, k, v, output, log-sum-exp), not with its square (the
    # scores, softmax and dropout mask an unfused attention keeps): twice the sequence, twice the bytes.
    longer = count_structure(lambda: _Attention(0.1), inputs(128), precision=precision)
    assert _attention_bytes(longer) / _attention_bytes(with_dropout) == pytest.approx(2.0, rel=0.05)
    flops = _layer(with_dropout, "<root>").forward.matmul_flops.per_sample
    assert flops == 2 * 2 * 64 * 64 * (8 + 8)  # QKᵀ and PV of 2 heads of 8 over 64 positions


def test_structures_without_convolution_flops_read_as_none() -> None:
    doc = count_structure(_linear, _linear_input).to_dict()
    assert all("conv_flops" not in layer["forward"] for layer in doc["layers"])
    s = ModelStructure.from_dict(doc)
    assert all(layer.forward.conv_flops == Affine(0.0, 0.0) for layer in s.layers)


def _head(out_features: int) -> Any:
    """A language-model head as GPT-2 has it (768 → vocabulary, no bias) on 16 positions per sample."""
    return (
        lambda: nn.Sequential(nn.Linear(768, out_features, bias=False)),
        lambda batch: torch.randn(batch, 16, 768, requires_grad=True),
    )


@pytest.mark.parametrize("precision", [Precision.BF16, Precision.FP16])
def test_a_half_precision_head_off_16_byte_rows_is_recorded_unaligned(precision: Precision) -> None:
    """GPT-2's 50,257-token head: the logits' rows are 100,514 bytes in bf16/fp16, not a multiple of 16, so
    its forward product and both backward ones (dX through the logits' gradient, dW through its
    transpose) are unaligned; nanoGPT's 50,304 (a multiple of 64) leaves none."""
    odd = _layer(count_structure(*_head(50_257), precision=precision), "0")
    assert odd.forward.matmul_flops == Affine(0.0, 2 * 16 * 768 * 50_257)
    assert odd.forward.unaligned_flops == odd.forward.matmul_flops
    assert odd.backward.matmul_flops == Affine(0.0, 2 * 2 * 16 * 768 * 50_257)
    assert odd.backward.unaligned_flops == odd.backward.matmul_flops
    padded = count_structure(*_head(50_304), precision=precision)
    assert _layer(padded, "0").forward.matmul_flops.per_sample > 0
    assert padded.forward.unaligned_flops == Affine(0.0, 0.0)
    assert padded.backward.unaligned_flops == Affine(0.0, 0.0)
    assert padded.unaligned_share(64) == 0.0
    counted = count_structure(*_head(50_257), precision=precision)
    assert counted.unaligned_share(64) == pytest.approx(1.0)
    doc = counted.to_dict()
    assert doc["layers"][0]["forward"]["unaligned_flops"] == [0.0, 2 * 16 * 768 * 50_257]
    assert ModelStructure.from_dict(doc) == counted


def test_float32_products_are_never_unaligned() -> None:
    """fp32 matrix products do not run on fp16/bf16 tensor cores: the 16-byte rule is not theirs."""
    s = count_structure(*_head(50_257), precision=Precision.FP32)
    assert s.forward.matmul_flops.per_sample > 0
    assert s.forward.unaligned_flops == s.backward.unaligned_flops == Affine(0.0, 0.0)
    assert "unaligned_flops" not in s.to_dict()["layers"][0]["forward"]


def test_leading_dimension_follows_the_strides_of_row_and_column_major_matrices() -> None:
    logits = torch.empty(4, 50_257, dtype=torch.bfloat16)
    assert leading_dimension(logits) == 50_257
    assert leading_dimension(logits.t()) == 50_257  # column-major: the stride of its columns
    assert leading_dimension(torch.empty(3, 8, 768)) == 768
    assert leading_dimension(torch.empty(1, 50_257)) is None  # one row: no stride between rows
    assert leading_dimension(torch.empty(4, 6)[:, ::2]) is None  # neither dimension unit-stride


def test_gpt2_small_in_bf16_has_its_head_unaligned() -> None:
    """The shipped reference GPT-2 small (vocabulary 50,257, head tied to wte): its head's three products
    are the unaligned ones, about a quarter of the step's counted FLOPs; BERT-base's are its 2-way QA head's
    only (a negligible share)."""
    from srift.refmodels.build import structure_path

    def shipped(name: str, precision: Precision) -> ModelStructure:
        return ModelStructure.from_dict(json.loads(structure_path(name, precision).read_text())["structure"])

    gpt2 = shipped("gpt2-small", Precision.BF16)
    unaligned = [
        layer.name
        for layer in gpt2.layers
        if layer.forward.unaligned_flops != Affine(0.0, 0.0)
        or layer.backward.unaligned_flops != Affine(0.0, 0.0)
    ]
    assert unaligned == ["net.lm_head"]
    assert 0.2 < gpt2.unaligned_share(64) < 0.35
    assert shipped("gpt2-small", Precision.FP32).unaligned_share(64) == 0.0
    assert 0 < shipped("bert-base", Precision.BF16).unaligned_share(64) < 1e-4


@pytest.mark.parametrize(
    ("name", "precision"), [("resnet50", Precision.FP32), ("gpt2-small", Precision.BF16)]
)
def test_shipped_structures_are_a_fresh_count(name: str, precision: Precision) -> None:
    """The shipped files carry the convolutions' FLOPs and fused attention (`python -m srift.refmodels.build`
    rewrites them)."""
    from srift.refmodels.build import structure_path

    shipped = json.loads(structure_path(name, precision).read_text())["structure"]
    assert shipped == json.loads(_fresh_count(name, precision))


def test_autocast_casts_a_reused_weight_once_per_forward() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.fc(x))

    s = count_structure(Twice, _linear_input, precision=Precision.BF16)
    fc = _layer(s, "fc")
    # The weight (64 parameters) is read in float32 and written in bfloat16 once per forward (autocast's
    # cast cache), however often it is used: 64·(4 + 2) bytes, the only batch-independent element-wise work.
    assert fc.forward.other_bytes.fixed == 64 * (4 + 2)


def test_cuda_float32_operators_move_float32_bytes_under_autocast() -> None:
    def normed() -> nn.Module:
        return nn.Sequential(nn.Linear(8, 8, bias=False), nn.LayerNorm(8, elementwise_affine=False))

    bf16 = _layer(count_structure(normed, _linear_input, precision=Precision.BF16), "1")
    fp32 = _layer(count_structure(normed, _linear_input, precision=Precision.FP32), "1")
    # layer_norm runs in float32 under CUDA autocast: its bf16 input (8·2 bytes per sample) is cast up
    # (read 16, write 32), then it moves what the float32 model's layer norm moves.
    assert bf16.forward.other_bytes.per_sample == fp32.forward.other_bytes.per_sample + 8 * (2 + 4)
    assert bf16.forward.kernels == fp32.forward.kernels + 1
