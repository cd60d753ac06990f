"""vela: LLM inference on CPU with vLLM's offline Python API.

    from vela import LLM, SamplingParams

    llm = LLM(model="model.gguf")
    outputs = llm.generate(["Once upon a time"], SamplingParams(temperature=0, max_tokens=32))
    print(outputs[0].outputs[0].text)

``python -m vela serve|generate|...`` runs the ``vela`` command line tool.
"""

from .llm import LLM
from .outputs import CompletionOutput, Logprob, RequestOutput
from .sampling_params import GuidedDecodingParams, SamplingParams, StructuredOutputsParams
from .tokenizer import Tokenizer

__version__ = "0.1.0"
__all__ = ["LLM", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams", "RequestOutput", "CompletionOutput", "Logprob", "Tokenizer"]
