"""Reports people read: terminal tables, markdown for pull requests, charts.

``terminal.write(terminalreporter, records, gate)`` and ``terminal.render(...)``,
``markdown.render(records, gate)`` + ``markdown.write(path, text)``,
``plot.write(directory, records)`` (needs the ``plot`` extra: matplotlib).
"""
