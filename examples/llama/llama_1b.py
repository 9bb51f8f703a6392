"""A Llama-shaped decoder (TinyLlama-1.1B's shape: 1.1B parameters, 4.4 GB in f32), compiled without its weights.

kiln calls get_model() with its parameters on the meta device and reads the weights from `weights`
only to write the .irpa, one tensor at a time. Write the checkpoint first (random, from a seed):

    python examples/llama/llama.py 1b
    kiln compile examples/llama/llama_1b.py --timing                # f32
    kiln compile examples/llama/llama_1b.py --dtype bf16 --timing   # bf16, converted as it is written
"""

from llama import build, prompt

weights = "checkpoints/1b/*.safetensors"


def get_model():
    return build("1b")


def get_example_inputs():
    return prompt("1b")
