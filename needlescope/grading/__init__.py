"""Grading of model replies: pure functions, no I/O. recall/ (the recall probe's metric),
keywords.py (keyword recall of the needle cases), by_hand.py (one answer, as
``needlescope grade`` prints it)."""
