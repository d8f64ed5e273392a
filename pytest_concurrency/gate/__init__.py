"""How a result is judged: the statistics and the verdicts, on what ``store`` reads.

``compare`` judges time and instruction counts against a baseline document, ``memory`` the
memory figures; ``stats`` holds the tests they use, ``verdicts`` what they decide (read by
``report``); ``calibrate`` measures the machine's speed. Baseline files, their shape and
sessions, and atomic writes are ``store``'s.
Nothing here knows pytest: the plugin hands records in and shows the verdicts.
"""
