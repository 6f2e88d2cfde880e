"""HTTP routes, one module per concern (runs, episodes, public views, operations)."""
