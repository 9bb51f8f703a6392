"""A Llama-shaped decoder (Llama-2-7B's shape: 6.7B parameters, 27 GB in f32), compiled without its weights.

kiln calls get_model() with its parameters on the meta device and reads the weights from `weights`
only to write the .irpa, one tensor at a time. Write the checkpoint first (random, from a seed):

    python examples/llama/llama.py 7b
    kiln compile examples/llama/llama_7b.py --timing                # f32
    kiln compile examples/llama/llama_7b.py --dtype bf16 --timing   # bf16, converted as it is written
"""

from llama import build, prompt

weights = "checkpoints/7b/*.safetensors"


def get_model():
    return build("7b")


def get_example_inputs():
    return prompt("7b")
