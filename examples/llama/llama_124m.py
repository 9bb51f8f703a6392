"""A Llama-shaped decoder (GPT-2 small's width and depth in Llama's shape: 134M parameters, 0.5 GB in f32), compiled without its weights.

kiln calls get_model() with its parameters on the meta device and reads the weights from `weights`
only to write the .irpa, one tensor at a time. Write the checkpoint first (random, from a seed):

    python examples/llama/llama.py 124m
    kiln compile examples/llama/llama_124m.py --timing                # f32
    kiln compile examples/llama/llama_124m.py --dtype bf16 --timing   # bf16, converted as it is written
"""

from llama import build, prompt

weights = "checkpoints/124m/*.safetensors"


def get_model():
    return build("124m")


def get_example_inputs():
    return prompt("124m")
