"""A causal LM of Llama-3.2-1B's shape (hidden 2048, 16 layers, 32 heads, 8 KV heads, vocabulary 128256; 1.5B parameters with its head untied), for generation.

Compiled with its prefill and decode over a KV cache, from a checkpoint of random weights (never held
whole in memory):

    python examples/llama/llama.py 3.2-1b --dtype bf16
    kiln compile examples/llama/llama3_1b.py --generate --max-seq-len 512 --dtype bf16 --target cuda
    kiln generate examples/llama/llama3_1b.vmfb --ids 128000,791,1176 --max-new-tokens 64
"""

from llama import build_causal_lm, prompt

weights = "checkpoints/3.2-1b/*.safetensors"


def get_model():
    return build_causal_lm("3.2-1b")


def get_example_inputs():
    return prompt("3.2-1b")
