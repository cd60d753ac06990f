"""llm.generate throughput against `vela bench throughput` for the same work.

    PYTHONPATH=build/py/python python3 python/benchmarks/bench_throughput.py -m MODEL.gguf \\
        --cli build/py/tools/vela [--num-prompts 32 --input-len 128 --output-len 128]

Both runs: N prompts of random token ids from the middle of the vocabulary, greedy,
ignore_eos, max_tokens = output-len, all submitted at once, with the engine defaults of both
(64 sequences, 512 tokens per step, KV blocks of 8, prefix caching on). Each side runs
--repeats times, alternating, and the best of each is compared (less noise from other load).
"""

import argparse
import json
import random
import subprocess
import time

from vela import LLM, SamplingParams


def python_run(llm, prompts, output_len):
    params = SamplingParams(temperature=0, max_tokens=output_len, ignore_eos=True)
    start = time.perf_counter()
    out = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(r.outputs[0].token_ids) for r in out)
    return tokens / seconds, seconds


def cli_run(cli, model, n, input_len, output_len):
    r = subprocess.run([cli, "bench", "throughput", "-m", model, "--num-prompts", str(n),
                        "--input-len", str(input_len), "--output-len", str(output_len),
                        "--sequential-prompts", "0", "--shared-prefix-len", "0", "-o", "json"],
                       check=True, capture_output=True, text=True)
    batched = json.loads(r.stdout)["batched"]
    return batched["output_tokens_per_s"], batched["seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--cli", required=True, help="the vela binary")
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with LLM(model=a.model) as llm:
        n_vocab = llm.get_tokenizer().vocab_size
        rng = random.Random(1)
        lo, hi = min(100, n_vocab - 1), max(n_vocab - 100, 1)
        prompts = [[rng.randint(lo, hi) for _ in range(a.input_len)]
                   for _ in range(a.num_prompts)]
        python_run(llm, prompts[:2], 4)  # warm-up: page in the weights
        py_best = cli_best = 0.0
        for i in range(a.repeats):
            # A fresh token set each time: the prefix cache must not help either side.
            prompts = [[rng.randint(lo, hi) for _ in range(a.input_len)]
                       for _ in range(a.num_prompts)]
            py, py_s = python_run(llm, prompts, a.output_len)
            cli, cli_s = cli_run(a.cli, a.model, a.num_prompts, a.input_len, a.output_len)
            print(f"run {i}: python {py:.1f} tok/s ({py_s:.2f} s), "
                  f"vela bench {cli:.1f} tok/s ({cli_s:.2f} s)")
            py_best, cli_best = max(py_best, py), max(cli_best, cli)
    print(f"best: python {py_best:.1f} output tok/s, vela bench throughput {cli_best:.1f}: "
          f"ratio {py_best / cli_best:.3f}")


if __name__ == "__main__":
    main()
