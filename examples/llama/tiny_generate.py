"""A tiny Llama (2 layers, grouped-query attention, 256 tokens) with random weights, to try `--generate` in a minute:

    kiln compile examples/llama/tiny_generate.py --generate --max-seq-len 64 -o tiny.vmfb
    kiln generate tiny.vmfb --ids 1,2,3 --max-new-tokens 16
"""

import torch
from llama import build_causal_lm, prompt

torch.manual_seed(0)
model = build_causal_lm("tiny", vocab=256)
example_inputs = prompt("tiny", vocab=256)  # --generate makes its own; a plain compile uses these
