"""The five seed experiments (docs/seeds.md) on every selected concurrency model.

    pytest benchmarks --benchmark-only                          # compare the models
    pytest benchmarks --benchmark-only --concurrency-scale=smoke  # the 30-second version

Each case runs its workload on each model; the workload checks its own result every round.
"""


def test_seed_workload(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
