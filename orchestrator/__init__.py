"""PopcornBench orchestrator: catalog -> images -> sandbox -> agent -> scoring -> report.

Importing the package is cheap: every stage imports its heavy dependencies itself.
`orchestrator.runner` is the part that runs inside a sandbox and needs only torch.
"""

__version__ = "0.1.0"
BENCHMARK_VERSION = "2026.11"
