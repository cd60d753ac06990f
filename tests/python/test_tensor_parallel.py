"""LLM(model, tensor_parallel_size=T, pipeline_parallel_size=P): greedy output equals one
process's, token for token, when the process spawns its workers (T=2 here; P=2 and T=2 x P=2 in
child processes, as a process has one group) and under `mpirun -np 2 python3` (T=2, and P=2);
later LLMs of the same sizes reuse the workers; sizes the model does not split, other sizes in
the same process, a second open tensor-parallel LLM and a missing vela binary are clear errors.
Registered only where the build has MPI (tests/python/CMakeLists.txt); skipped when the module
has none."""

import functools
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import shared_model, vela_cli
from vela import LLM, SamplingParams, _vela

pytestmark = pytest.mark.skipif(not _vela.tensor_parallel_available(),
                                reason="this vela module was built without MPI")

# Models tests/dist compares under two ranks, with prompts their greedy outputs agree on: a
# trained model (MHA), every prompt batched together; random weights with packed int8 slices,
# the prompt tests/dist uses (flat distributions: on other prompts a near-tie within float
# rounding of the reordered sums can flip a token after a few dozen, as docs/parallelism.md says).
CASES = [("aidreams260K.gguf", ["Once upon a time", "The little robot",
                                "In the forest there was", "She said"]),
         ("tiny-llama-256-Q8_0.gguf", ["Once upon a time"])]


@pytest.fixture(autouse=True, scope="module")
def mpi_environment():
    # As CI runs it: as root, with more ranks than cores.
    saved = dict(os.environ)
    os.environ.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                       "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    os.environ.setdefault("VELA_BINARY", vela_cli())
    # Before this process joins MPI, which adds its rank's variables: a child given these
    # would take itself for one of mpirun's ranks.
    yield dict(os.environ)
    os.environ.clear()
    os.environ.update(saved)


def greedy():
    return SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)


def outputs(llm, prompts):
    return [(o.prompt_token_ids, o.outputs[0].token_ids, o.outputs[0].text)
            for o in llm.generate(prompts, greedy(), use_tqdm=False)]


@functools.lru_cache(maxsize=None)
def one_process_outputs(model, prompts):
    with LLM(model=model, num_threads=1) as llm:
        return outputs(llm, list(prompts))


def one_process(model, prompts):
    return one_process_outputs(model, tuple(prompts))


@pytest.mark.parametrize("name,prompts", CASES, ids=[name for name, _ in CASES])
def test_greedy_output_equals_one_process(name, prompts):
    model = shared_model(name)
    expected = one_process(model, prompts)
    # The second model reuses the first one's workers (the group lives as long as the process).
    with LLM(model=model, tensor_parallel_size=2, num_threads=1) as llm:
        got = outputs(llm, prompts)
        streamed = "".join(p.outputs[0].text
                           for p in llm.generate_stream(prompts[0], greedy()))
    assert got == expected
    assert all(len(ids) == 24 for _, ids, _ in got)
    assert streamed == expected[0][2]


def test_one_open_llm_per_group_and_one_size_per_process():
    model = shared_model("tiny-llama-256-F16.gguf")
    with LLM(model=model, tensor_parallel_size=2, num_threads=1) as llm:
        with pytest.raises(RuntimeError, match="another tensor-parallel LLM is open"):
            LLM(model=model, tensor_parallel_size=2, num_threads=1)
        assert llm.generate("hi", SamplingParams(max_tokens=2), use_tqdm=False)
    # 4 ranks split this model (2 KV heads replicated), but the process's group has 2.
    with pytest.raises(RuntimeError, match="group has 2 ranks.*tensor_parallel_size=2"):
        LLM(model=model, tensor_parallel_size=4)
    # As many ranks, but two stages of one rank each.
    with pytest.raises(RuntimeError, match="tensor_parallel_size=1, pipeline_parallel_size=2: "
                                           ".*group has 2 ranks.*use tensor_parallel_size=2 or"):
        LLM(model=model, pipeline_parallel_size=2)
    # Closed, the group serves the next LLM.
    with LLM(model=model, tensor_parallel_size=2, num_threads=1) as llm:
        assert llm.generate("hi", SamplingParams(max_tokens=2), use_tqdm=False)


def test_sizes_the_model_does_not_split():
    with pytest.raises(ValueError, match="tensor_parallel_size=3: .*8 attention heads do not "
                                         "split over 3 ranks"):
        LLM(model=shared_model("tiny-llama-256-Q8_0.gguf"), tensor_parallel_size=3)
    with pytest.raises(ValueError, match="does not split a Q/K norm over all heads"):
        LLM(model=shared_model("tiny-olmoe-F32.gguf"), tensor_parallel_size=2)
    with pytest.raises(ValueError, match="at most 256"):
        LLM(model=shared_model("aidreams260K.gguf"), tensor_parallel_size=257)
    # Checked before the process's group (of other sizes) is looked at.
    with pytest.raises(ValueError, match="tensor_parallel_size=1, pipeline_parallel_size=5: "
                                         ".*4 layers do not split over 5 pipeline stages"):
        LLM(model=shared_model("aidreams260K.gguf"), pipeline_parallel_size=5)
    with pytest.raises(ValueError, match="tensor_parallel_size=3, pipeline_parallel_size=2: "
                                         ".*8 attention heads do not split over 3 ranks"):
        LLM(model=shared_model("tiny-llama-256-Q8_0.gguf"), tensor_parallel_size=3,
            pipeline_parallel_size=2)


def test_a_missing_or_wrong_vela_binary(monkeypatch, tmp_path):
    model = shared_model("aidreams260K.gguf")
    monkeypatch.setenv("VELA_BINARY", str(tmp_path / "no-such-vela"))
    with pytest.raises(RuntimeError, match="VELA_BINARY=.*no-such-vela.* is not an executable"):
        LLM(model=model, tensor_parallel_size=2)
    # Spawned, another program would never join the group: it is not started.
    monkeypatch.setenv("VELA_BINARY", shutil.which("true") or "/bin/true")
    with pytest.raises(RuntimeError, match="is not a vela binary with the tensor-parallel"):
        LLM(model=model, tensor_parallel_size=2)


# The LLMs of argv[1]'s (model, prompts) one after another with the sizes argv[2] and argv[3],
# printing their greedy texts. Run alone, it spawns its workers; under mpirun every rank runs
# it, and the ranks other than 0 end inside their first LLM(...), once rank 0 exits.
SCRIPT = """
import json, sys
from vela import LLM, SamplingParams
params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
tensor, pipeline = int(sys.argv[2]), int(sys.argv[3])
results = []
for model, prompts in json.loads(sys.argv[1]):  # one after another: the ranks serve each
    with LLM(model=model, tensor_parallel_size=tensor, pipeline_parallel_size=pipeline,
             num_threads=1) as llm:
        results.append([o.outputs[0].text for o in llm.generate(prompts, params,
                                                                   use_tqdm=False)])
print(json.dumps(results), flush=True)
"""


def run_script(tmp_path, names, tensor, pipeline, env, launcher=()):
    """SCRIPT's output line for the CASES `names`, checked against one process's texts."""
    cases = [(shared_model(name), prompts) for name, prompts in CASES if name in names]
    expected = [[text for _, _, text in one_process(m, prompts)] for m, prompts in cases]
    script = tmp_path / "parallel.py"
    script.write_text(SCRIPT)
    r = subprocess.run(["timeout", "120", *launcher, sys.executable, str(script),
                        json.dumps(cases), str(tensor), str(pipeline)], capture_output=True,
                       env=env, timeout=150)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    lines = r.stdout.decode(errors="replace").splitlines()
    assert len(lines) == 1, lines  # only rank 0 prints
    assert json.loads(lines[0]) == expected


# Pipeline stages (whole layers) compute what one process does; with T=2 as well, the
# prompts above agree too. A child process each: this one's group has T=2, P=1.
@pytest.mark.parametrize("tensor,pipeline,names", [
    (1, 2, [name for name, _ in CASES]),
    (2, 2, ["aidreams260K.gguf"]),
], ids=["pipeline2", "tensor2xpipeline2"])
def test_pipeline_parallel_output_equals_one_process(tmp_path, mpi_environment, tensor,
                                                     pipeline, names):
    run_script(tmp_path, names, tensor, pipeline, mpi_environment)


@pytest.mark.parametrize("tensor,pipeline", [(2, 1), (1, 2)], ids=["tensor2", "pipeline2"])
def test_under_mpirun_the_other_rank_serves(tmp_path, mpi_environment, tensor, pipeline):
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if mpirun is None:
        pytest.skip("mpirun not found")
    env = dict(mpi_environment)
    env.pop("VELA_BINARY", None)  # mpirun starts the ranks: nothing is spawned
    run_script(tmp_path, [name for name, _ in CASES], tensor, pipeline, env,
               launcher=(mpirun, "-np", str(tensor * pipeline), "--oversubscribe"))
