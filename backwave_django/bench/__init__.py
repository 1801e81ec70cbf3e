"""The benchmark behind ``manage.py backwave_bench``: not part of the runtime. Its jobs are registered only
when a benchmark runs (:func:`jobs.register`), and its worker processes get their settings explicitly."""
