"""The model-family table: real architectures from transformers and timm, tiny and seeded.

Each `Family` builds one architecture the way a user ships it (the library's own modeling code,
its default attention and expert implementations) from a small configuration: a couple of
layers, widths of 32-64, a vocabulary of 128. Weights are the library's random initialization
under the family's own seed; nothing is downloaded. A wrapper returns the one tensor users read
(logits, the last hidden state), since kiln artifacts return tensors, not ModelOutputs.

Families marked `ci` form the fast subset tests/families runs on every change; the whole table
runs under `kiln families` (or `make models`), which rewrites FAMILIES.md. The runner is
family_runner.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

BATCH, SEQUENCE, VOCAB = 2, 16, 128  # batch 2: GPT-2 once failed only there


@dataclass(frozen=True)
class Family:
    """One architecture: `build` returns the module and its example inputs."""

    name: str
    library: str  # "transformers" or "timm"
    build: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]
    ci: bool = False  # in the fast subset (tests/families)
    note: str = ""  # why the family is in the table, when it is there for a known failure

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def instantiate(self) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        """The module in eval mode and its inputs, both drawn from the family's own seed."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            module, inputs = self.build()
        return module.eval(), inputs


class Output(nn.Module):
    """Calls a transformers model with its inputs by name and returns one field of its output."""

    def __init__(self, model: nn.Module, names: tuple[str, ...], field: str = "logits", **fixed: Any) -> None:
        super().__init__()
        self.model, self.names, self.field, self.fixed = model, names, field, fixed

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        output = self.model(**dict(zip(self.names, inputs, strict=True)), **self.fixed)
        return output[self.field] if isinstance(self.field, str) else output[0]


def _tokens(batch: int = BATCH, sequence: int = SEQUENCE, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, sequence))


def _pixels(batch: int = BATCH, size: int = 32, channels: int = 3) -> torch.Tensor:
    return torch.randn(batch, channels, size, size)


def _hf(model_type: str, head: str, **config: Any) -> nn.Module:
    """A transformers model of `model_type` with `head` ("AutoModelForCausalLM", ...) from a config."""
    import transformers

    configuration = transformers.AutoConfig.for_model(model_type, **config)
    return getattr(transformers, head).from_config(configuration)


# A decoder LM's common tiny sizes; families override what their configs name differently.
_DECODER = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
_ENCODER = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
)


def _causal_lm(model_type: str, **config: Any) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model = _hf(model_type, "AutoModelForCausalLM", **config)
        return Output(model, ("input_ids",), use_cache=False), (_tokens(),)

    return build


def _encoder(model_type: str, head: str = "AutoModel", field: str = "last_hidden_state", **config: Any):
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model = _hf(model_type, head, **config)
        return Output(model, ("input_ids",), field), (_tokens(),)

    return build


def _seq2seq(model_type: str, mask: bool = False, **config: Any) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """An encoder-decoder's logits; `mask`: with the encoder's attention mask as an input too."""

    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model = _hf(model_type, "AutoModelForSeq2SeqLM", **config)
        names, inputs = ("input_ids", "decoder_input_ids"), (_tokens(), _tokens(sequence=8))
        if mask:
            names, inputs = (*names, "attention_mask"), (*inputs, torch.ones(BATCH, SEQUENCE, dtype=torch.int64))
        return Output(model, names, use_cache=False), inputs

    return build


def _vision(model_type: str, head: str = "AutoModelForImageClassification", size: int = 32, **config: Any):
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model = _hf(model_type, head, image_size=size, **config)
        return Output(model, ("pixel_values",)), (_pixels(size=size),)

    return build


def _audio(model_type: str, samples: int = 1600, **config: Any):
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model = _hf(model_type, "AutoModel", **config)
        return Output(model, ("input_values",), "last_hidden_state"), (torch.randn(BATCH, samples),)

    return build


def _whisper() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    model = _hf(
        "whisper",
        "AutoModelForSpeechSeq2Seq",
        vocab_size=VOCAB,
        num_mel_bins=16,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=32,
        max_target_positions=32,
        decoder_start_token_id=1,
        pad_token_id=0,
    )
    features = torch.randn(BATCH, 16, 64)  # 2 * max_source_positions frames
    return Output(model, ("input_features", "decoder_input_ids"), use_cache=False), (features, _tokens(sequence=8))


# Small audio front ends: two convolutions instead of wav2vec2's seven.
_AUDIO = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    conv_dim=(32, 32),
    conv_stride=(5, 4),
    conv_kernel=(10, 8),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=4,
)


def import_torchvision() -> None:
    """Import torchvision, if installed, so that it works beside the CPU torch kiln pins.

    timm imports torchvision (a frozen batch norm, transforms), and so does transformers once
    torchvision is installed (its image utilities, on importing any model). PyPI's torchvision 0.28
    is built against CUDA torch: its C++ ops (nms, roi_align, ...) cannot load beside torch's CPU
    wheel, and its fake-tensor registrations for those ops then fail the import ("operator
    torchvision::nms does not exist"). Those registrations serve only the C++ ops, which no model
    here calls; when the ops cannot load, torchvision is imported without them (its Python part is
    unaffected). Where the ops load (a CUDA torch), nothing changes.
    """
    if importlib.util.find_spec("torchvision") is None:
        return
    try:
        importlib.import_module("torchvision")
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
        for name in [name for name in sys.modules if name == "torchvision" or name.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        importlib.import_module("torchvision")


def _timm(name: str, size: int = 64, **kwargs: Any) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model = importlib.import_module("timm").create_model(name, pretrained=False, num_classes=16, **kwargs)
        return model, (_pixels(size=size),)

    return build


_MOE = dict(_DECODER, num_local_experts=4, num_experts_per_tok=2)

FAMILIES: tuple[Family, ...] = (
    # Decoder LMs.
    Family("gpt2", "transformers", _causal_lm("gpt2", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64), ci=True),
    Family("gpt_neox", "transformers", _causal_lm("gpt_neox", **_ENCODER)),
    Family("opt", "transformers", _causal_lm("opt", vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=64)),
    Family("bloom", "transformers", _causal_lm("bloom", vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4)),
    Family("falcon", "transformers", _causal_lm("falcon", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=True, num_kv_heads=2)),
    Family("llama", "transformers", _causal_lm("llama", **_DECODER), ci=True),
    Family("mistral", "transformers", _causal_lm("mistral", **_DECODER, sliding_window=8)),
    Family("qwen2", "transformers", _causal_lm("qwen2", **_DECODER)),
    Family("qwen3", "transformers", _causal_lm("qwen3", **_DECODER, head_dim=16)),
    Family("gemma", "transformers", _causal_lm("gemma", **_DECODER, head_dim=16)),
    Family("gemma2", "transformers", _causal_lm("gemma2", **_DECODER, head_dim=16, sliding_window=8)),
    Family("phi", "transformers", _causal_lm("phi", **_ENCODER)),
    Family("phi3", "transformers", _causal_lm("phi3", **_DECODER, pad_token_id=0)),
    Family("stablelm", "transformers", _causal_lm("stablelm", **_DECODER)),
    Family("gpt_bigcode", "transformers", _causal_lm("gpt_bigcode", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64)),
    # Mixture-of-experts LMs: transformers routes tokens with histc, sort and grouped matmuls.
    Family("mixtral", "transformers", _causal_lm("mixtral", **_MOE), ci=True),
    Family("qwen2_moe", "transformers", _causal_lm("qwen2_moe", **_DECODER, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64)),
    Family("olmoe", "transformers", _causal_lm("olmoe", **_DECODER, num_experts=4, num_experts_per_tok=2)),
    Family("granitemoe", "transformers", _causal_lm("granitemoe", **_MOE)),
    Family("jamba", "transformers", _causal_lm("jamba", **_MOE, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, mamba_d_state=8, mamba_expand=2, use_mamba_kernels=False)),
    Family("deepseek_v3", "transformers", _causal_lm("deepseek_v3", **dict(_DECODER, num_key_value_heads=4), n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, moe_intermediate_size=64, first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)),
    Family("gpt_oss", "transformers", _causal_lm("gpt_oss", **_DECODER, num_local_experts=4, num_experts_per_tok=2, head_dim=16, sliding_window=8, layer_types=["sliding_attention", "full_attention"])),
    # Recurrent and state-space LMs.
    Family("rwkv", "transformers", _causal_lm("rwkv", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, attention_hidden_size=64, intermediate_size=128, context_length=64), note="rescales its weights on its first call; eager runs first here, so the artifact sees rescaled weights (compiled fresh it returns the mutated weights as extra outputs: issue 13)"),
    Family("mamba", "transformers", _causal_lm("mamba", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, state_size=8, use_mambapy=False)),
    Family("reformer", "transformers", _causal_lm("reformer", vocab_size=VOCAB, hidden_size=64, num_attention_heads=2, attention_head_size=32, feed_forward_size=128, attn_layers=["local", "lsh"], axial_pos_shape=[4, 4], axial_pos_embds_dim=[32, 32], max_position_embeddings=16, is_decoder=True, num_buckets=4), note="slices by values computed at run time"),
    # Encoders.
    Family("bert", "transformers", _encoder("bert", **_ENCODER), ci=True),
    Family("roberta", "transformers", _encoder("roberta", **_ENCODER, pad_token_id=1)),
    Family("distilbert", "transformers", _encoder("distilbert", vocab_size=VOCAB, dim=64, hidden_dim=128, n_layers=2, n_heads=4, max_position_embeddings=64)),
    Family("albert", "transformers", _encoder("albert", **_ENCODER, embedding_size=32)),
    Family("electra", "transformers", _encoder("electra", **_ENCODER, embedding_size=32)),
    Family("deberta_v2", "transformers", _encoder("deberta-v2", **_ENCODER, position_buckets=8, relative_attention=True, pos_att_type=["p2c", "c2p"])),
    Family("fnet", "transformers", _encoder("fnet", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, max_position_embeddings=64), note="Fourier transforms (aten.fft_fftn)"),
    Family("funnel", "transformers", _encoder("funnel", vocab_size=VOCAB, d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1], block_repeats=[1, 1], num_decoder_layers=1, architectures=["FunnelModel"]), note="avg_pool2d with ceil_mode"),
    Family("longformer", "transformers", _encoder("longformer", **_ENCODER, attention_window=4, pad_token_id=1), note="branches on a tensor's value (`if is_global_attn:`): data-dependent control flow"),
    # Encoder-decoders.
    Family("t5", "transformers", _seq2seq("t5", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4), ci=True),
    Family("bart", "transformers", _seq2seq("bart", vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64)),
    Family("marian", "transformers", _seq2seq("marian", vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64, decoder_start_token_id=0, pad_token_id=0)),
    Family("led", "transformers", _seq2seq("led", vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64, attention_window=4), note="branches on a tensor's value (`if is_global_attn:`): data-dependent control flow"),
    Family("switch_transformers", "transformers", _seq2seq("switch_transformers", mask=True, vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4, num_experts=4, expert_capacity=8, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1), note="its router casts its classifier in forward (`self.classifier.to(dtype)`), which torch.export cannot trace"),
    Family("longt5", "transformers", _seq2seq("longt5", mask=True, vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, local_radius=4, encoder_attention_type="transient-global", global_block_size=4), note="given its attention mask, as users call it; unmasked, transformers' export path builds a batch-1 side bias"),
    Family("whisper", "transformers", _whisper, ci=True),
    # Vision.
    Family("vit", "transformers", _vision("vit", patch_size=8, **{k: v for k, v in _ENCODER.items() if k not in ("vocab_size", "max_position_embeddings")})),
    Family("swin", "transformers", _vision("swin", patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4), ci=True, note="a constant table indexed in a list at import"),
    Family("convnext", "transformers", _vision("convnext", num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)),
    Family("mobilevit", "transformers", _vision("mobilevit", size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]), note="its logits are all zeros at this size (a zero-initialized head), so the check is of dtype and shape, not values"),
    Family("segformer", "transformers", _vision("segformer", head="AutoModelForSemanticSegmentation", size=64, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], decoder_hidden_size=32)),
    # Audio encoders.
    Family("wav2vec2", "transformers", _audio("wav2vec2", **_AUDIO)),
    Family("wavlm", "transformers", _audio("wavlm", **_AUDIO, num_buckets=32, max_bucket_distance=64), note="a constant table indexed in a list at import"),
    # timm.
    Family("timm_resnet", "timm", _timm("resnet18"), ci=True),
    Family("timm_efficientnet", "timm", _timm("efficientnet_b0")),
    Family("timm_mobilenetv3", "timm", _timm("mobilenetv3_small_050")),
    Family("timm_convnext", "timm", _timm("convnext_atto")),
    Family("timm_regnet", "timm", _timm("regnetx_002")),
    Family("timm_vit", "timm", _timm("vit_tiny_patch16_224", size=32, img_size=32)),
    Family("timm_selecsls", "timm", _timm("selecsls42b"), note="a convolution off by one after lowering"),
    Family("timm_levit", "timm", _timm("levit_128s", size=64, img_size=64), note="a constant table indexed in a list at import"),
    Family("timm_coatnet", "timm", _timm("coatnet_nano_rw_224", size=64, img_size=64), note="a constant table indexed in a list at import"),
    Family("timm_tiny_vit", "timm", _timm("tiny_vit_5m_224", size=64), note="a constant table indexed in a list at import"),
    Family("timm_eva02", "timm", _timm("eva02_tiny_patch14_224", size=28, img_size=28), note="a constant table indexed in a list at import"),
)

import_torchvision()  # before any builder imports transformers or timm
