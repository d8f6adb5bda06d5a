"""Renderers: pure functions of a Plan (or of plans) to rich tables, markdown and JSON.
Never recompute sizing here; plotting (matplotlib) is imported only by the plot module."""
