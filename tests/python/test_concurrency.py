"""The GIL is released while the engine runs, and Ctrl-C (KeyboardInterrupt) stops a running
generate() within a moment, leaving the LLM usable."""

import _thread
import threading
import time

import pytest

from conftest import shared_model
from vela import LLM, SamplingParams

# Long enough to measure and to interrupt 0.5 s in: 48 prompts x 480 tokens on the 256-wide
# model, about 1.5 s on 2 cores with the packed F32 kernels (16 x 400 took 0.5 s).
LONG = SamplingParams(temperature=0, max_tokens=480, ignore_eos=True)
PROMPTS = [f"Story number {i}:" for i in range(48)]


@pytest.fixture(scope="module")
def llm():
    with LLM(model=shared_model("tiny-llama-256-F32.gguf"), max_model_len=512) as llm:
        yield llm


def test_another_thread_runs_during_generate(llm):
    stop = threading.Event()
    counts = []

    def count():
        n = 0
        while not stop.is_set():
            n += 1
        counts.append(n)

    # How fast the thread counts with the GIL to itself, for scale.
    alone = threading.Thread(target=count)
    start = time.monotonic()
    alone.start()
    time.sleep(0.2)
    stop.set()
    alone.join()
    per_second_alone = counts.pop() / (time.monotonic() - start)

    stop.clear()
    worker = threading.Thread(target=count)
    worker.start()
    start = time.monotonic()
    llm.generate(PROMPTS, LONG, use_tqdm=False)
    elapsed = time.monotonic() - start
    stop.set()
    worker.join()
    # Holding the GIL would leave the counter at the few switch intervals of the polls.
    assert elapsed > 0.5
    assert counts[0] / elapsed > 0.02 * per_second_alone


def test_keyboard_interrupt_stops_generation(llm):
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        llm.generate(PROMPTS, LONG, use_tqdm=False)
    elapsed = time.monotonic() - start
    timer.join()
    assert elapsed < 2.0, f"took {elapsed:.1f} s to stop"
    out = llm.generate(PROMPTS[:2], SamplingParams(temperature=0, max_tokens=5, ignore_eos=True),
                       use_tqdm=False)
    assert [len(r.outputs[0].token_ids) for r in out] == [5, 5]


def test_keyboard_interrupt_while_streaming(llm):
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    pieces = 0
    with pytest.raises(KeyboardInterrupt):
        for _ in llm.generate_stream(PROMPTS, LONG):
            pieces += 1
    timer.join()
    assert 0 < pieces < len(PROMPTS) * LONG.max_tokens
    assert llm.generate(PROMPTS[0], SamplingParams(max_tokens=3), use_tqdm=False)
