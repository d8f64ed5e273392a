"""Native reference rows: the seed workloads in Go, Rust (tokio) and Kotlin (coroutines).

The programs ship as sources in this package (``go/``, ``rust/``, ``kotlin/``), are built on
first use with the toolchain found on the machine and cached (``build``), and run as a child
process per benchmark that reports each round as a JSON line (``child``); the Python side
checks every round's result itself (``checks``). ``toolchains`` says what each language needs
and why a row is skipped. They are reference rows: the floor the same machine reaches
natively, shown beside the Python models, not gated unless asked (see the README).
"""

from ..backends import child_env

CORRUPT_ENV = child_env.NATIVE_CORRUPT  # "1": every round corrupts one message (tests)
