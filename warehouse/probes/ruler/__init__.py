"""RULER's families' warehouse side (niah, variable_tracking, aggregation): their views (*.sql,
created after views.sql) and their part of the report (report.py: each family's figures and
niah's drill-down target). Nothing is imported here: the store reads the views as files."""

__all__: list[str] = []
