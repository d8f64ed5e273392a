"""How a case runs in a process of its own (pyperf's model).

``isolate`` keeps a pool of worker processes, one per model (or per lane when counting), and
bounds each round; ``worker`` is the process at the other end (a plain worker or a fork
server); ``launch`` decides whether a counted session must run again whole under valgrind.
What a round measures is ``measure``'s business; how it is judged, ``gate``'s.
"""
