"""A causal LM of Llama-3.1-8B's shape (hidden 4096, 32 layers, 32 heads, 8 KV heads, vocabulary 128256; 8.0B parameters), for generation.

Compiled with its prefill and decode over a KV cache, from a checkpoint of random weights (never held
whole in memory):

    python examples/llama/llama.py 3.1-8b --dtype bf16
    kiln compile examples/llama/llama3_8b.py --generate --max-seq-len 512 --dtype bf16 --target cuda
    kiln generate examples/llama/llama3_8b.vmfb --ids 128000,791,1176 --max-new-tokens 64
"""

from llama import build_causal_lm, prompt

weights = "checkpoints/3.1-8b/*.safetensors"


def get_model():
    return build_causal_lm("3.1-8b")


def get_example_inputs():
    return prompt("3.1-8b")
