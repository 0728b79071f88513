"""The typed summary of one model's analysis, the contract between the reports that fill it and the studies,
claims and readers that consume it: ``sections`` (the dataclasses, down to the ``metrics``' own typed
results), ``store`` (``summary.json`` written and read), ``tables`` (study tables and column paths checked
against the types). It imports ``metrics``, ``models``, ``config`` and ``training`` only: never a report.
"""
