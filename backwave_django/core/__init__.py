"""The pure Core: states, retry, dispatch and the Node Driver.

Nothing in this package imports Django, threads, a clock or a database. Every decision a node makes is a
function of the events it is given, and every event carries the time it happened (``now``).
"""
