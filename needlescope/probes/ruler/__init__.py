"""RULER's synthetic task families (NVIDIA/RULER, Apache-2.0), as pure functions.

``niah`` (needle variants), ``variable_tracking`` (RULER's ``vt``) and ``aggregation``
(``cwe`` and ``fwe``): each module draws a cell's content from its seed, builds the prompt
around a number of haystack units, and fits that number to a token budget (``fit``);
``scoring`` holds RULER's metrics and ``templates`` its prompts, byte for byte.
"""

__all__: list[str] = []  # its modules are used by name: niah, variable_tracking, aggregation, fit
