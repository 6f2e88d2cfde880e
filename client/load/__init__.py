"""Load generation: a metered, bounded connection pool, multi-process swarms of users, their
report and plot, `privrl bench http`, and a locustfile (Locust is imported only by that file)."""
