"""How a result is judged: the baseline store, its sessions, the statistics and the verdicts.

``compare`` judges time and instruction counts against a baseline document, ``memory`` the
memory figures; ``stats`` holds the tests they use, ``verdicts`` what they decide (read by
``report``). ``baseline`` reads and writes baseline files (atomically, through ``atomic``),
``history`` keeps a baseline's earlier sessions, ``calibrate`` measures the machine's speed.
Nothing here knows pytest: the plugin hands records in and shows the verdicts.
"""
