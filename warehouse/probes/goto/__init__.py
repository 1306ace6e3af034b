"""The goto probe's warehouse side: its views (*.sql, created after views.sql) and
its part of the report (report.py: its figures, its drill-down targets and answers where it
shows them). Nothing is imported here: the store reads the views as files."""

__all__: list[str] = []
