"""What is stored, and how: baseline files (``baseline``: read safely, checked, parsed, saved),
what a file must hold and the type of each value (``shape``), a baseline's sessions as the gate
reads them (``history``), and atomic writes (``atomic``). Beside ``gate/``, at its layer, and
importing nothing of the judging (tests/test_layers.py checks it): the gate reads what is stored
here, never the other way round.
"""
