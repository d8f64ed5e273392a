"""What of the user's command line a child pytest process gets: a side, a pass, a counted side."""

from __future__ import annotations

#: Options the base side must not act on: it writes no baseline, report or JSON of the user's.
_HEAD_ONLY = {
    "--concurrency-baseline": True,
    "--concurrency-save-baseline": True,
    "--concurrency-baseline-sessions": True,
    "--concurrency-report-md": True,
    "--concurrency-verdicts": True,
    "--concurrency-plot": True,
    "--benchmark-json": True,
    "--benchmark-save": True,
    "--benchmark-autosave": False,
    "--benchmark-compare": False,
    "--benchmark-compare-fail": True,
    "--benchmark-histogram": False,
    "--junitxml": True,
    "--junit-xml": True,
    "--benchmark-cprofile-dump": False,
}


def head_only_removed(args) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _HEAD_ONLY:
            skip = _HEAD_ONLY[name] and "=" not in arg
            continue
        out.append(arg)
    return out
