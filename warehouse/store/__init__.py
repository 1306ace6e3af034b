"""Storage: append-only Parquet written atomically, DuckDB views over it, and the rows it holds.

Nothing here computes a statistic or draws a chart (``warehouse/stats``, ``warehouse/charts``).
"""

from needlescope.warehouse.store.parquet import Warehouse, default_root

__all__ = ["Warehouse", "default_root"]
