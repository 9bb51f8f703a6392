"""`--generate`: a causal LM's prefill and decode over a KV cache kept in the artifact, and the loops over them.

The model is examples/llama's tiny Llama (grouped-query attention), built on the meta device and
compiled from a checkpoint written here, as a real model would be; the reference is transformers'
own `generate` on the same weights, in f32, so greedy ids must be equal.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from testkit import EXAMPLES, llama, recorded_per_call, tiny_causal_lm_checkpoint

import kiln
from kiln.cli.main import kiln as kiln_cli
from kiln.compiler.driver import compile_file
from kiln.compiler.model_file import GenerationOptions, ModelSource
from kiln.compiler.options import CompileOptions
from kiln.errors import KilnError
from kiln.runtime.generation import prefill
from kiln.runtime.manifest import Manifest, ManifestError

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
VOCAB = 256
MAX_SEQ_LEN = 48
BATCH = 2
CHUNK = 4  # prompts of 9 and 5 tokens take three and two prefill calls, the last padded


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    """The tiny Llama compiled for generation (batch 2) from a checkpoint, and the same model in eager PyTorch."""
    folder = tmp_path_factory.mktemp("generation")
    path, reference = tiny_causal_lm_checkpoint(folder, VOCAB, extra='tokenizer = "no-such-tokenizer-here"')
    source = ModelSource(path, generation=GenerationOptions(MAX_SEQ_LEN, BATCH, CHUNK))
    result = compile_file(source, CompileOptions(), folder / "tiny.vmfb")
    return result.path, reference


def prompt(tokens: int, seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, tokens), generator=torch.Generator().manual_seed(seed))


def test_greedy_ids_are_transformers(compiled: tuple[Path, torch.nn.Module]) -> None:
    path, reference = compiled
    module = kiln.load(path)
    # A long generation, then shorter ones: a later call must not see what an earlier one cached.
    for tokens, new in ((9, MAX_SEQ_LEN - 8), (5, 12), (1, 20)):
        ids = prompt(tokens, seed=tokens)
        expected = reference.generate(ids, max_new_tokens=new, do_sample=False)
        assert torch.equal(module.generate(ids, max_new_tokens=new), expected), (tokens, new)


def test_decode_logits_are_eager_forward(compiled: tuple[Path, torch.nn.Module]) -> None:
    """Each step's logits are those of a forward over the whole sequence without a cache."""
    path, reference = compiled
    module = kiln.load(path)
    ids = prompt(7, seed=11)
    token, logits, position = prefill(module, ids)
    sequence = ids
    for _ in range(5):
        with torch.no_grad():
            expected = reference(sequence).logits[:, -1]
        assert torch.allclose(logits, expected, rtol=1e-4, atol=1e-5)
        assert torch.equal(token, expected.argmax(-1))
        sequence = torch.cat([sequence, token[:, None]], dim=1)
        assert position.tolist() == [sequence.shape[1] - 1]
        token, logits, position = module.decode(token, position)


def test_manifest_says_how_to_generate(compiled: tuple[Path, torch.nn.Module]) -> None:
    path, reference = compiled
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["generation"] == {
        "max_seq_len": MAX_SEQ_LEN,
        "batch": BATCH,
        "vocab": VOCAB,
        "prefill_chunk": CHUNK,
        "eos_token_ids": [reference.generation_config.eos_token_id],
        "tokenizer": "no-such-tokenizer-here",
        "prefill": "prefill",
        "decode": "decode",
    }
    functions = {function["name"]: function for function in manifest["functions"]}
    assert [tensor["shape"] for tensor in functions["prefill"]["inputs"]] == [[BATCH, CHUNK], [1], [1]]  # static: kiln's kernels
    assert [tensor["shape"] for tensor in functions["decode"]["inputs"]] == [[BATCH], [1]]
    assert [tensor["shape"] for tensor in functions["decode"]["outputs"]] == [[BATCH], [BATCH, VOCAB], [1]]
    assert functions["prefill"]["state"] == functions["decode"]["state"]
    layers = reference.config.num_hidden_layers
    # The cache is the only state: updated in place, never replaced whole (the position is a result).
    assert set(functions["decode"]["state"]) == {f"kiln_kv.layers.{i}.{kind}" for i in range(layers) for kind in ("keys", "values")}


def test_sampling_is_seeded_and_top_k_1_is_greedy(compiled: tuple[Path, torch.nn.Module]) -> None:
    path, _ = compiled
    module = kiln.load(path)
    ids = prompt(4, seed=5)
    first = module.generate(ids, 16, do_sample=True, temperature=0.8, top_p=0.9, seed=7)
    assert torch.equal(first, module.generate(ids, 16, do_sample=True, temperature=0.8, top_p=0.9, seed=7))
    assert first.shape == (BATCH, 20) and int(first.max()) < VOCAB
    assert torch.equal(module.generate(ids, 16, do_sample=True, top_k=1, seed=1), module.generate(ids, 16))


@pytest.mark.parametrize(
    ("ids", "new", "message"),
    [
        (torch.zeros(BATCH, 40, dtype=torch.int64), 10, "a prompt of 40 tokens and 10 new ones need a cache of 49 positions; the artifact's holds 48"),
        (torch.zeros(1, 4, dtype=torch.int64), 4, "input_ids has 1 rows; the artifact generates 2 at once"),
        (torch.full((BATCH, 4), VOCAB, dtype=torch.int64), 4, "input_ids must be token ids from 0 to 255"),
        (torch.zeros(BATCH, 4), 4, "input_ids must be an integer tensor [batch, prompt tokens]"),
    ],
)
def test_generate_refuses_what_the_artifact_cannot_hold(
    compiled: tuple[Path, torch.nn.Module], ids: torch.Tensor, new: int, message: str
) -> None:
    with pytest.raises(KilnError, match=message.replace("[", r"\[").replace("]", r"\]")):
        kiln.load(compiled[0]).generate(ids, new)


def test_kiln_generate_prints_the_greedy_ids(compiled: tuple[Path, torch.nn.Module]) -> None:
    path, reference = compiled
    ids = prompt(3, seed=2)
    expected = reference.generate(ids, max_new_tokens=6, do_sample=False)[:, 3:]
    rows = [",".join(str(int(token)) for token in row) for row in ids]
    result = CliRunner().invoke(kiln_cli, ["generate", str(path), "--ids", rows[0], "--ids", rows[1], "--max-new-tokens", "6"])
    assert result.exit_code == 0, result.output
    steps = [step.split() for step in result.stdout.strip().split("|") if step.strip()]
    assert [[int(token) for token in step] for step in steps] == expected.T.tolist()
    assert "prefill: 6 tokens in" in result.stderr and "decode: 10 tokens in" in result.stderr


def test_kiln_generate_prompt_names_the_missing_tokenizer(compiled: tuple[Path, torch.nn.Module]) -> None:
    result = CliRunner().invoke(kiln_cli, ["generate", str(compiled[0]), "--prompt", "hi", "--prompt", "yo"])
    assert result.exit_code != 0
    assert "--prompt needs the tokenizer 'no-such-tokenizer-here', which could not be loaded" in result.output


def test_generate_needs_an_artifact_compiled_for_it(tmp_path: Path) -> None:
    path = tmp_path / "mlp.vmfb"
    compile_file(ModelSource(EXAMPLES / "mlp.py"), CompileOptions(), path)
    with pytest.raises(KilnError, match="the artifact was not compiled for generation"):
        kiln.load(path).generate(torch.zeros(1, 2, dtype=torch.int64))


def test_generate_needs_a_causal_lm() -> None:
    with pytest.raises(KilnError, match=r"mlp.py: --generate needs a transformers causal LM .* the model is a Sequential"):
        ModelSource(EXAMPLES / "mlp.py", generation=GenerationOptions(16)).load()


def test_sliding_window_narrower_than_the_cache_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mistral.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch
            from transformers import MistralConfig, MistralForCausalLM
            model = MistralForCausalLM(MistralConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=64, sliding_window=16))
            example_inputs = (torch.zeros(1, 4, dtype=torch.int64),)
            """
        )
    )
    with pytest.raises(KilnError, match="sliding window of 16 tokens, shorter than --max-seq-len 32") as failure:
        ModelSource(path, generation=GenerationOptions(32)).load()
    assert failure.value.hint == "compile with --max-seq-len 16 or less"


@pytest.mark.parametrize("option", [["--max-seq-len", "64"], ["--prefill-chunk", "16"]])
def test_generation_options_without_generate_are_a_usage_error(option: list[str]) -> None:
    result = CliRunner().invoke(kiln_cli, ["compile", str(EXAMPLES / "mlp.py"), *option])
    assert result.exit_code == 2
    assert "--max-seq-len, --batch and --prefill-chunk shape a --generate compile; add --generate" in result.output


def test_manifest_generation_must_name_functions(compiled: tuple[Path, torch.nn.Module]) -> None:
    data = json.loads(compiled[0].with_suffix(".json").read_text())
    data["generation"]["decode"] = "step"
    with pytest.raises(ManifestError, match=r"generation\.decode: 'step' is not one of the artifact's functions"):
        Manifest.from_json(json.dumps(data))


ARCHITECTURES = {
    # GPT-2: learned positions, Conv1D projections, its own attention; Qwen2: biased projections, GQA
    "gpt2": "transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=256, n_positions=128))",
    "qwen2": "transformers.Qwen2ForCausalLM(transformers.Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, "
    "num_attention_heads=4, num_key_value_heads=2, vocab_size=256))",
}


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_other_decoders_generate_as_transformers(tmp_path: Path, architecture: str) -> None:
    path = tmp_path / f"{architecture}.py"
    path.write_text(
        f"import torch, transformers\ntorch.manual_seed(0)\nmodel = {ARCHITECTURES[architecture]}\n"
        "example_inputs = (torch.zeros(1, 4, dtype=torch.int64),)\n"
    )
    result = compile_file(ModelSource(path, generation=GenerationOptions(40)), CompileOptions(), tmp_path / f"{architecture}.vmfb")
    model = ModelSource(path).load().module
    ids = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(3))
    # every prompt token counts: transformers would mask those equal to a pad id unless told so
    expected = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False)
    assert torch.equal(kiln.load(result.path).generate(ids, 20), expected)


@pytest.mark.parametrize("vocab", [7, 256, 300, 128256])
def test_the_artifacts_greedy_choice_is_argmax(vocab: int) -> None:
    """The two-step argmax (blocks, then across them) picks argmax's index, first of ties included."""
    from kiln.compiler.generation import _greedy

    logits = torch.randn(4, vocab, generator=torch.Generator().manual_seed(vocab))
    logits[1] = 0.0  # all tied: the first
    logits[2, -1] = 1e4  # the last entry, in a padded block
    logits[3, [vocab // 3, vocab - 2]] = 1e4  # two tied in different blocks: the first
    assert torch.equal(_greedy(logits), logits.argmax(-1))


def test_manifest_prefill_chunk_must_fit_the_cache(compiled: tuple[Path, torch.nn.Module]) -> None:
    data = json.loads(compiled[0].with_suffix(".json").read_text())
    data["generation"]["prefill_chunk"] = MAX_SEQ_LEN + 1
    with pytest.raises(ManifestError, match=rf"generation\.prefill_chunk: {MAX_SEQ_LEN + 1} is more than max_seq_len {MAX_SEQ_LEN}"):
        Manifest.from_json(json.dumps(data))
    del data["generation"]["prefill_chunk"]  # format 6's generation: recompile
    with pytest.raises(ManifestError, match="generation: missing field 'prefill_chunk'"):
        Manifest.from_json(json.dumps(data))


def test_cuda_commands_are_recorded_once_and_replayed(tmp_path: Path) -> None:
    """State is declared in the order the functions store it, so IREE packs the initial values as each
    store does: the state's offsets are constants, and with kiln's kernels' bindings indirect every
    command buffer is recorded at load and replayed per call. Declared in reverse, the offsets became
    push constants and each call recorded its ~340 dispatches again (one-shot): a decode step of
    Llama-1B was host-bound at 5 ms. With the kernels' bindings direct, each call still recorded them
    again, into a reusable buffer it used once."""
    model_file = EXAMPLES / "llama" / "tiny_generate.py"
    source = ModelSource(model_file, generation=GenerationOptions(32))
    compile_file(source, CompileOptions(target="cuda", gpu_arch="sm_90", dump_dir=tmp_path / "dumps"), tmp_path / "tiny.vmfb")
    hal = (tmp_path / "dumps" / "04-vmfb-11-hal.mlir").read_text()
    assert "mode(OneShot)" not in hal and recorded_per_call(hal) == []
    assert "__offset" not in hal


def test_decode_attends_over_the_key_value_heads(tmp_path: Path) -> None:
    """One token's attention runs over the key/value heads themselves, the query heads of each GQA group
    as rows of theirs, not over keys and values repeated to every query head (transformers' repeat_kv:
    two copies of the cache's length a layer, each decode step); on cuda, kiln's row kernel takes it."""
    model_file = EXAMPLES / "llama" / "tiny_generate.py"
    source = ModelSource(model_file, generation=GenerationOptions(32))
    result = compile_file(source, CompileOptions(target="cuda", gpu_arch="sm_90"), tmp_path / "tiny.vmfb")
    config = llama().build_causal_lm("tiny", VOCAB).config
    kv_heads, groups = config.num_key_value_heads, config.num_attention_heads // config.num_key_value_heads
    assert groups > 1
    attention = {record["contraction"].split("-")[0]: record for record in result.compilation.compiled.manifest.kernels if record["contraction"].startswith("attn")}
    decode = attention[f"attn1x{kv_heads}x{groups}x32x{config.head_dim}"]
    assert decode["code"] == "kiln" and decode["tiles"].startswith("1x")
    assert not any(name.startswith(f"attn1x{config.num_attention_heads}x1x") for name in attention)


def test_loading_a_model_that_does_not_generate_leaves_transformers_alone() -> None:
    """Every model file's load imports compiler/generation.py; transformers (6 s to import here) only
    when a model is compiled for generation, not for every compile."""
    import subprocess
    import sys

    check = (
        "import sys; from kiln.compiler.model_file import ModelSource; "
        f"ModelSource({str(EXAMPLES / 'mlp.py')!r}).load(); assert 'transformers' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
